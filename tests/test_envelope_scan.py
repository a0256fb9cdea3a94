"""The envelope scanner: the same document as ``json.loads``, with table rows left in the body.

Tricky bodies are compared with ``json.loads`` byte for byte (order, types, values); bodies that
are not JSON must fail the way ``json.loads`` fails, and through the client they become the
refusal as text they were before.  The client tests talk to a small HTTP server on 127.0.0.1 that
answers a fixed body, since the reference store never sends a broken one.
"""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import send_answer, serve
from hypothesis import given, settings
from hypothesis import strategies as st

from pooler import strictjson
from pooler.client.answer_scan import BATCH, WINDOW, TableRows, parse
from pooler.client.http import TEXT_LIMIT, WHOLE_BELOW, ToolRunClient
from pooler.redact import Redactor
from pooler.run.tables import TableWriter

ROWS_A = [{"n": 1, "text": "abc"}, {"n": 2, "text": "abc"}]


def plain(value: Any) -> Any:
    """``value`` with every ``TableRows`` turned into the list it stands for."""
    if isinstance(value, TableRows):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def same_as_loads(body: bytes) -> Any:
    """Parse ``body`` both ways and insist on the same document; the scanner's own comes back."""
    doc = parse(body)
    expected = strictjson.loads(body)
    # json.dumps sees key order, 1 against 1.0 against true, and NaN.
    assert json.dumps(plain(doc)) == json.dumps(expected)
    return doc


def envelope(tables: Any, **data: Any) -> dict[str, Any]:
    return {"ok": True, "ms": 3, "unit_ms": 1,
            "data": {"result": True, "message": "m", "detail": {}, "tables": tables, "files": [], **data}}


def test_table_arrays_become_rows_left_in_the_body() -> None:
    body = json.dumps(envelope({"rows": ROWS_A, "empty": []})).encode()
    doc = same_as_loads(body)
    rows = doc["data"]["tables"]["rows"]
    assert isinstance(rows, TableRows)
    assert len(rows) == 2
    assert repr(rows) == "TableRows(2 rows)"
    # Re-iterable: every pass decodes the rows afresh.
    assert list(rows) == list(rows) == ROWS_A
    assert (rows[0], rows[-1], rows[1:]) == (ROWS_A[0], ROWS_A[1], ROWS_A[1:])
    assert rows == ROWS_A
    assert rows != ROWS_A[:1]
    with pytest.raises(IndexError, match="table row index out of range"):
        rows[2]
    empty = doc["data"]["tables"]["empty"]
    assert isinstance(empty, TableRows)
    assert (len(empty), list(empty), bool(empty)) == (0, [], False)


def test_masked_rows_pass_through_the_mask_as_they_are_read() -> None:
    body = json.dumps(envelope({"t": [{"name": "top-secret-1"}, {"name": "ok"}]})).encode()
    rows = parse(body)["data"]["tables"]["t"]
    masked = rows.masked(Redactor(["top-secret-1"]).value)
    assert list(masked) == [{"name": "***"}, {"name": "ok"}]
    assert list(masked.masked(lambda row: {**row, "seen": True})) == [
        {"name": "***", "seen": True}, {"name": "ok", "seen": True}]
    assert list(rows) == [{"name": "top-secret-1"}, {"name": "ok"}]


# Escaped keys: "data" and "tables" written with escapes are still the envelope's keys.
ESCAPED = (b'{"ok": true, "d\\u0061ta": {"t\\u0061bles": {"q\\"uote\\\\d": [1],'
           b' "\\u00fc\\n": [{"\\u00e9": 2}]}, "result": true}}')
# Numbers of every shape, as rows and inside rows.
NUMBERS = (b'{"ok": true, "data": {"tables": {"n": [0, -0, -0.0, 1e308, 1E-7, 12345678901234567890123,'
           b' 2.5e+3, NaN, Infinity, -Infinity, {"x": -1.25}]}}}')

TRICKY = [
    # A byte order mark, as json.loads takes it from bytes.
    b"\xef\xbb\xbf" + json.dumps(envelope({"rows": ROWS_A})).encode(),
    # Whitespace everywhere the grammar allows it.
    (b' \r\n\t{ "ok" :true ,"data"\n:\t{ "tables" : { "t" : [ \n {"a" : 1} ,\n\t{"a":2} , 3 ] ,'
     b' "e" : [ ] } , "result" : true } } \n\r\t'),
    ESCAPED,
    # Tables that are not arrays stay what they are.
    json.dumps(envelope({"obj": {"a": [1]}, "s": "text", "n": 5, "z": None, "b": True, "f": 1.5})).encode(),
    # "tables" that is not an object, "data" that is not an object.
    json.dumps(envelope([[1, 2], [3]])).encode(),
    json.dumps({"ok": True, "data": [{"tables": {"t": [1]}}]}).encode(),
    json.dumps({"ok": True, "data": {"result": True, "tables": {}}}).encode(),
    json.dumps({"ok": True, "data": {}}).encode(),
    # "tables" deeper than data.tables is only a value.
    json.dumps(envelope({"t": [1]}, detail={"tables": {"x": [1, 2]}})).encode(),
    json.dumps({"tables": {"t": [1]}, "ok": True}).encode(),
    # Unicode raw and escaped, astral characters, a lone surrogate escape, raw surrogate bytes.
    json.dumps(envelope({"u": [{"s": "ü😀ß"}, "\ud83d\ude00", "x\ud800y"]}), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"),
    json.dumps(envelope({"u": [{"s": "ü😀ß"}, "\ud800"]}), ensure_ascii=True).encode(),
    NUMBERS,
    # Rows of every kind; "}," and "]," inside strings and nested values.
    json.dumps(envelope({"mixed": [{"s": "},{"}, {"s": "],["}, [1, [2, {"a": "},"}]], "str", 7, None, True,
                                   {"a": {"b": {"c": [{"d": 1}, {"e": 2}]}}, "z": [[], {}]}]})).encode(),
    # Duplicate keys: the last value wins, in the first key's place.
    b'{"ok": true, "data": {"tables": {"t": [1]}}, "data": {"tables": {"t": [2], "t": [3, 4]}, "x": 1}}',
    # Not an object at the top: json.loads decides.
    b"[1, 2]",
    b'"ok"',
    b"5",
    b"{}",
    # UTF-16: json.loads takes it from bytes, so the scanner hands it over.
    json.dumps(envelope({"t": [1]})).encode("utf-16"),
]


@pytest.mark.parametrize("body", TRICKY, ids=range(len(TRICKY)))
def test_tricky_bodies_give_what_json_loads_gives(body: bytes) -> None:
    same_as_loads(body)


def test_escaped_envelope_keys_still_leave_the_rows_in_the_body() -> None:
    doc = same_as_loads(ESCAPED)
    assert isinstance(doc["data"]["tables"]["\u00fc\n"], TableRows)
    assert list(doc["data"]["tables"]) == ['q"uote\\d', "\u00fc\n"]


def test_numbers_json_cannot_carry_are_kept_as_the_stores_text() -> None:
    rows = list(parse(NUMBERS)["data"]["tables"]["n"])
    assert rows[7:10] == ["NaN", "Infinity", "-Infinity"]
    assert rows[5] == 12345678901234567890123
    assert not any(isinstance(r, float) and not math.isfinite(r) for r in rows)


BROKEN = [
    b"",
    b"   ",
    b'{"ok": true, "data": {"tables": {"t": [1, 2',
    b'{"ok": true, "data": {"tables": {"t": [1, 2]}}',
    b'{"ok": true, "data": {"tables": {"t": [1, 2,]}}}',
    b'{"ok": true, "data": {"tables": {"t": [1 2]}}}',
    b'{"ok": true, "data": {"tables": {"t": [{"a": 1},]}}}',
    b'{"ok": true, "data": {"tables": {"t": [{"a": 1}, {"a" 2}]}}}',
    b'{"ok": true, "data": {"tables": {"t": [{"a": 1}]}}} extra',
    b'{"ok": true, "data": {"tables": {"t": ["\xff"]}}}',
    b'{"ok": true, "data": {"tables": {"t": ["a\x01b"]}}}',
    b'{"ok": true, "data": {"tables": {t: [1]}}}',
    b'{"ok": true,}',
    b'{"ok": true, "data": {"tables": {"t": [1]}}}}',
]


@pytest.mark.parametrize("body", BROKEN, ids=range(len(BROKEN)))
def test_bodies_json_loads_refuses_are_refused_the_same_way(body: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(body)
    with pytest.raises(ValueError) as got:
        parse(body)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_every_cut_of_a_body_fails_as_json_loads_fails() -> None:
    body = json.dumps(envelope({"t": [{"a": "x},{y", "b": [1.5, -2]}, "ü😀", 12, None]})).encode()
    for end in range(len(body)):
        with pytest.raises(ValueError):
            json.loads(body[:end])
        with pytest.raises(ValueError):
            parse(body[:end])


def test_a_row_nested_too_deep_fails_as_json_loads_fails() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    body = b'{"ok": true, "data": {"tables": {"t": [1, ' + deep + b"]}}}"
    with pytest.raises(RecursionError):
        json.loads(body)
    with pytest.raises(RecursionError):
        parse(body)


def row_of(n: int, width: int, chars: str) -> dict[str, Any]:
    return {"n": n, "text": (chars * width)[:width], "nested": {"a": [n, {"b": "},"}]}}


@pytest.mark.parametrize("chars", ["abc", "ü", "€😀", "a😀"])
def test_rows_across_many_windows_and_cut_characters(chars: str) -> None:
    rows = [row_of(n, 1 + n % 97, chars) for n in range(6_000)]
    body = json.dumps(envelope({"rows": rows, "after": [1]}), ensure_ascii=False, indent=1).encode()
    assert len(body) > 3 * WINDOW
    doc = same_as_loads(body)
    assert len(doc["data"]["tables"]["rows"]) == len(rows)


def test_a_row_longer_than_the_window() -> None:
    rows = [{"n": 1}, {"big": "😀" * (WINDOW + 5), "n": 2}, {"n": 3}, "x" * (3 * BATCH), 12345]
    body = json.dumps(envelope({"rows": rows}), ensure_ascii=False).encode()
    doc = same_as_loads(body)
    assert len(doc["data"]["tables"]["rows"]) == 5


def test_numbers_are_never_cut_at_a_window_end() -> None:
    # Every row a number, so some number is sure to straddle the window's end.
    rows = list(range(10**6, 10**6 + 120_000))
    body = json.dumps(envelope({"n": rows}), separators=(",", ":")).encode()
    assert list(parse(body)["data"]["tables"]["n"]) == rows


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(tables=st.dictionaries(st.text(max_size=5), st.lists(JSON, max_size=6) | JSON, max_size=3),
       indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans(), bom=st.booleans(),
       cut=st.none() | st.integers(min_value=0))
def test_any_envelope_parses_as_json_loads_does(tables: dict[str, Any], indent: int | None,
                                                 ascii_only: bool, bom: bool, cut: int | None) -> None:
    body = json.dumps(envelope(tables), indent=indent, ensure_ascii=ascii_only).encode(
        "utf-8", "surrogatepass")
    body = (b"\xef\xbb\xbf" if bom else b"") + body
    if cut is not None:
        body = body[:cut % len(body)]
        with pytest.raises(ValueError):
            json.loads(body)
        with pytest.raises(ValueError):
            parse(body)
        return
    same_as_loads(body)


def test_reading_and_writing_a_big_table_never_holds_its_rows(tmp_path: Path) -> None:
    rows = [{"n": n, "text": "abcdefghijklmnopqrst", "secret": f"hush-{n % 7}-top"} for n in range(100_000)]
    body = json.dumps(envelope({"rows": rows})).encode()
    del rows
    writer = TableWriter(tmp_path / "out")
    tracemalloc.start()
    try:
        tables = parse(body)["data"]["tables"]
        summary = writer.write("big", tables, redactor=Redactor(["hush-3-top"]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # json.loads alone would take about ten times the body; here the window, one batch of rows
    # and the file's buffer are all there is.
    assert peak < len(body) / 2, (peak, len(body))
    assert summary["rows"]["rows"] == 100_000
    assert summary["rows"]["head"][0] == '{"n":0,"text":"abcdefghijklmnopqrst","secret":"hush-0-top"}'
    lines = (tmp_path / "out" / "tables" / "big.rows.jsonl").read_text().splitlines()
    assert len(lines) == 100_000
    assert lines[3] == '{"n":3,"text":"abcdefghijklmnopqrst","secret":"***"}'
    assert sum("hush-3-top" in line for line in lines) == 0


# The client: bodies that reach _reply over real HTTP


JSON_TYPE = "application/json"
Fixed = tuple[ToolRunClient, list[tuple[int, str, bytes]]]


class FixedAnswers(BaseHTTPRequestHandler):
    """Answers every POST with the next body the test queued."""

    bodies: ClassVar[list[tuple[int, str, bytes]]] = []

    def do_POST(self) -> None:
        send_answer(self, *self.bodies.pop(0))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""


@pytest.fixture
def fixed() -> Iterator[Fixed]:
    FixedAnswers.bodies = []
    with serve(FixedAnswers) as url, ToolRunClient(url, "tok") as client:
        yield client, FixedAnswers.bodies


def test_a_truncated_answer_is_the_refusal_as_text(fixed: Fixed) -> None:
    client, bodies = fixed
    cut = b'{"ok": true, "data": {"result": true, "tables": {"t": [{"a": 1}, {"a"'
    bodies.append((200, JSON_TYPE, cut))
    reply = client.tool_run("MELBIS_AGENT_TEST", "CmdTable")
    assert reply.data == {"result": False, "message": cut.decode()}
    assert (reply.result, reply.status, reply.server_ms) == (False, 200, None)


def test_a_long_broken_answer_keeps_its_first_characters(fixed: Fixed) -> None:
    client, bodies = fixed
    body = json.dumps(envelope({"t": [{"n": n} for n in range(5_000)]})).encode()[:-3]
    bodies.append((200, JSON_TYPE, body))
    reply = client.tool_run("MELBIS_AGENT_TEST", "CmdTable")
    assert reply.data == {"result": False, "message": body[:TEXT_LIMIT].decode()}


def test_tool_run_rows_stay_in_the_body_and_tool_list_is_whole(fixed: Fixed) -> None:
    client, bodies = fixed
    rows = ROWS_A * (WHOLE_BELOW // len(json.dumps(ROWS_A)) + 1)
    body = b"\xef\xbb\xbf" + json.dumps(envelope({"rows": rows}), indent=2).encode()
    assert len(body) > WHOLE_BELOW
    bodies.extend([(200, JSON_TYPE, body), (200, JSON_TYPE, body)])
    reply = client.tool_run("MELBIS_AGENT_TEST", "CmdTable")
    assert reply.result is True
    assert isinstance(reply.data["tables"]["rows"], TableRows)
    assert reply.data["tables"]["rows"] == rows
    assert list(reply.data) == ["result", "message", "detail", "tables", "files"]
    assert (reply.server_ms, reply.module_ms) == (3, 1)
    listed = client.tool_list()
    assert listed.data["tables"] == {"rows": rows}
    assert type(listed.data["tables"]["rows"]) is list


def test_a_small_tool_run_answer_is_decoded_whole(fixed: Fixed) -> None:
    client, bodies = fixed
    bodies.append((200, JSON_TYPE, json.dumps(envelope({"rows": ROWS_A})).encode()))
    reply = client.tool_run("MELBIS_AGENT_TEST", "CmdTable")
    assert type(reply.data["tables"]["rows"]) is list
    assert reply.data["tables"]["rows"] == ROWS_A


def test_refusals_keep_their_texts(fixed: Fixed) -> None:
    client, bodies = fixed
    bodies.extend([
        (401, JSON_TYPE, b'{"ok": false, "error": "ACCESS_DENIED: no such token"}'),
        (500, "text/plain", b"MELBIS_AGENT_TEST\\CmdCrash failed: boom"),
        (200, JSON_TYPE, b'{"ok": true, "data": [1]}'),
        (200, JSON_TYPE, b'{"ok": "yes", "data": {"tables": {"t": [1]}}}'),
    ])
    assert client.tool_run("MELBIS_AGENT_TEST", "CmdEcho").data == {
        "result": False, "message": "ACCESS_DENIED: no such token (HTTP 401 Unauthorized)"}
    assert client.tool_run("MELBIS_AGENT_TEST", "CmdCrash").data == {
        "result": False, "message": "MELBIS_AGENT_TEST\\CmdCrash failed: boom"}
    assert client.tool_run("MELBIS_AGENT_TEST", "CmdEcho").data == {
        "result": False, "message": '{"ok": true, "data": [1]}'}
    assert client.tool_run("MELBIS_AGENT_TEST", "CmdEcho").data == {
        "result": False, "message": '{"ok": "yes", "data": {"tables": {"t": [1]}}}'}
