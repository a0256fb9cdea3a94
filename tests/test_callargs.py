"""tool_run's client-side refusals, word for word, and what a call sends after them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pooler.client.arguments import check_into, prepare_call, read_jsonl_fields
from pooler.client.http import Attachment
from pooler.errors import InputError

ENTRY = '{"file": "photos/1.jpg", "entity": "store", "elem_id": 1532}'


def refusal(tmp_path: Path, **kw: Any) -> str:
    with pytest.raises(InputError) as info:
        prepare_call(base=tmp_path, **kw)
    return info.value.message


def test_params_and_params_source_together(tmp_path: Path) -> None:
    assert refusal(tmp_path, params={"a": 1}, params_source="p.json") == (
        "params or params_source, not both - write the fields in params or in the file params_source names,"
        " and drop the other."
    )
    # An empty object is named too: None is the only "not named".
    both = refusal(tmp_path, params={}, params_source="p.json")
    assert both.startswith("params or params_source, not both")


def test_files_and_files_source_together(tmp_path: Path) -> None:
    assert refusal(tmp_path, files=[], files_source="f.json") == (
        "files or files_source, not both - list the attachments in files or in the file files_source names,"
        " and drop the other."
    )


def test_params_must_be_an_object(tmp_path: Path) -> None:
    assert refusal(tmp_path, params=[1, 2]) == (
        'params is an object of fields - write it as {"field": value, ...}, not as a list.'
    )
    assert refusal(tmp_path, params="x").endswith("not as a string.")


def test_files_must_be_a_list(tmp_path: Path) -> None:
    assert refusal(tmp_path, files={"file": "a"}) == (
        f"files is a list of entries - write it as [{ENTRY}, ...], not as an object."
    )
    assert refusal(tmp_path, files=["a.jpg"]) == (
        f"files is a list of entries - entry 1 of files is a string; write every entry as {ENTRY}."
    )


def test_entry_without_file(tmp_path: Path) -> None:
    assert refusal(tmp_path, files=[{"entity": "store", "elem_id": 1}]) == (
        "Every entry needs file - a path on this machine. Entry 1 of files has none."
    )
    assert refusal(tmp_path, files=[{"file": 7}]) == (
        "Every entry needs file - a path on this machine. Entry 1 of files has a number."
    )


def test_missing_files(tmp_path: Path) -> None:
    assert refusal(tmp_path, files=[{"file": "nope.jpg"}]) == f"No such file: {tmp_path / 'nope.jpg'}"
    assert refusal(tmp_path, params_source="gone.json") == f"No such file: {tmp_path / 'gone.json'}"
    assert refusal(tmp_path, files_source="/no/such/list.json") == "No such file: /no/such/list.json"
    assert refusal(tmp_path, files=[{"file": "."}]) == (
        f"No such file: {tmp_path} - it is a folder; name a file."
    )


def test_source_not_utf8_or_with_a_zero_byte(tmp_path: Path) -> None:
    (tmp_path / "latin.json").write_bytes('{"name": "café"}'.encode("latin-1"))
    (tmp_path / "zero.json").write_bytes(b'{"name": "a\x00b"}')
    (tmp_path / "utf16.json").write_text('{"a": 1}', encoding="utf-16")
    assert refusal(tmp_path, params_source="latin.json") == (
        f"{tmp_path / 'latin.json'} is not utf-8 text - save it in utf-8."
    )
    assert refusal(tmp_path, params_source="zero.json") == (
        f"{tmp_path / 'zero.json'} holds a NUL character (a zero byte) at line 1, column 12 - JSON does not "
        "allow it; remove it."
    )
    assert refusal(tmp_path, files_source="utf16.json") == (
        f"{tmp_path / 'utf16.json'} is not utf-8 text - save it in utf-8."
    )


def test_source_cut_off(tmp_path: Path) -> None:
    (tmp_path / "cut.json").write_text('{"name": "Euro",\n "skey": ', encoding="utf-8")
    assert refusal(tmp_path, params_source="cut.json") == (
        f"{tmp_path / 'cut.json'} is not whole json - Expecting value at line 2 column 10;"
        " it may be cut off: fix it or write it again whole."
    )


def test_source_of_the_wrong_kind(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text("[1]", encoding="utf-8")
    (tmp_path / "obj.json").write_text('{"file": "a.jpg"}', encoding="utf-8")
    assert refusal(tmp_path, params_source="list.json") == (
        f"{tmp_path / 'list.json'} holds no object of fields - it holds a list;"
        ' write {"field": value, ...}.'
    )
    assert refusal(tmp_path, files_source="obj.json") == (
        f"{tmp_path / 'obj.json'} holds no list of entries - it holds an object; write [{ENTRY}, ...]."
    )
    (tmp_path / "bad_entry.json").write_text('[{"entity": "store"}]', encoding="utf-8")
    assert refusal(tmp_path, files_source="bad_entry.json") == (
        "Every entry needs file - a path on this machine."
        f" Entry 1 of {tmp_path / 'bad_entry.json'} has none."
    )


def test_source_over_the_size_limit(tmp_path: Path) -> None:
    (tmp_path / "big.json").write_text(json.dumps({"a": "x" * 3000}), encoding="utf-8")
    assert refusal(tmp_path, params_source="big.json", max_source_bytes=2048) == (
        f"{tmp_path / 'big.json'} is 2.9 KB, over the 2 KB a file read whole may hold - split it,"
        " or send its rows by a step over rows."
    )


INTO = "into is the bare name of a job - "
FIX = "write one word with no path and no dots, like photos."


@pytest.mark.parametrize(("into", "text"), [
    ("", INTO + "it is empty; " + FIX),
    ("a/b", INTO + "'a/b' holds a path; " + FIX),
    ("..\\x", INTO + "'..\\\\x' holds a path; " + FIX),
    ("photos.v2", INTO + "'photos.v2' holds a dot; " + FIX),
    ("my job", INTO + "'my job' holds ' '; use only letters, digits, _ and -."),
    ("x" * 65, INTO + "'xxxxxxxxxxxxxxxxxxxx'... is 65 characters long; keep it to 64."),
])
def test_into_refusals(tmp_path: Path, into: str, text: str) -> None:
    assert refusal(tmp_path, into=into) == text
    with pytest.raises(InputError):
        check_into(into)


def test_into_accepted() -> None:
    check_into(None)
    check_into("photos")
    check_into("goods_2026-09")


def test_params_source_read_and_nulls_dropped(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('\ufeff{"name": "Euro", "skey": null, "pos": 3}', encoding="utf-8")
    args = prepare_call(params_source="p.json", base=tmp_path, debug=True, into="cur")
    assert args.params == {"name": "Euro", "pos": 3}
    assert args.files == []
    assert args.into == "cur"
    assert args.debug is True
    direct = prepare_call(params={"a": None, "b": 0, "c": False, "d": ""}, base=tmp_path)
    assert direct.params == {"b": 0, "c": False, "d": ""}


def test_files_source_entries_become_attachments(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "front.jpg").write_bytes(b"\xff\xd8front")
    other = tmp_path / "back.png"
    other.write_bytes(b"png")
    entries = [
        {"file": "img/front.jpg", "entity": "store", "elem_id": 1532, "real_name": "Front view"},
        {"file": str(other), "entity": "store", "elem_id": 1532, "kind_key": "kExtra", "angle": 90},
    ]
    (tmp_path / "photos.json").write_text(json.dumps(entries), encoding="utf-8")
    args = prepare_call(params={"profile": "catalog"}, files_source="photos.json", base=tmp_path)
    assert args.files == [
        Attachment(tmp_path / "img" / "front.jpg",
                   {"entity": "store", "elem_id": 1532, "real_name": "Front view"}),
        Attachment(other, {"entity": "store", "elem_id": 1532, "kind_key": "kExtra", "angle": 90}),
    ]
    assert args.params == {"profile": "catalog"}
    inline = prepare_call(files=entries[:1], base=tmp_path)
    assert inline.files == args.files[:1]


def test_jsonl_field_read_on_this_machine(tmp_path: Path) -> None:
    (tmp_path / "goods.jsonl").write_text(
        '{"ref": 1, "sku": "A", "name": "Tea", "price": 1.5}\n\n'
        '{"ref": 2, "sku": "B", "name": "Cup", "price": 3}\n',
        encoding="utf-8",
    )
    out = read_jsonl_fields({"goods": {"file": "goods.jsonl"}, "other": {"file": "x.json"},
                             "two": {"file": "a.jsonl", "more": 1}, "n": 5}, tmp_path)
    assert out == {
        "goods": [{"ref": 1, "sku": "A", "name": "Tea", "price": 1.5},
                  {"ref": 2, "sku": "B", "name": "Cup", "price": 3}],
        "other": {"file": "x.json"},
        "two": {"file": "a.jsonl", "more": 1},
        "n": 5,
    }
    args = prepare_call(params={"goods": {"file": "goods.jsonl"}}, base=tmp_path)
    assert [row["ref"] for row in args.params["goods"]] == [1, 2]


def test_jsonl_field_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"ref": 1}\n{"ref": 2,}\n', encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_jsonl_fields({"goods": {"file": "bad.jsonl"}}, tmp_path)
    # The parser's own words and column: Python 3.13 names the trailing comma, older ones what follows it.
    try:
        json.loads('{"ref": 2,}')
    except json.JSONDecodeError as e:
        said = f"{e.msg} at column {e.colno}"
    assert said in ("Expecting property name enclosed in double quotes at column 11",
                    "Illegal trailing comma before end of object at column 10")
    assert info.value.message == (
        f"{tmp_path / 'bad.jsonl'} line 2 is not whole json - {said}; write one JSON object per line."
    )
    with pytest.raises(InputError) as gone:
        read_jsonl_fields({"goods": {"file": "gone.jsonl"}}, tmp_path)
    assert gone.value.message == f"No such file: {tmp_path / 'gone.jsonl'}"
