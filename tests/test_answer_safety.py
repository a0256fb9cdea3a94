"""Answers and calls that once broke a run: a call that cannot be encoded, a deep or dripping
answer, numbers JSON cannot carry, statuses that ask to wait, and many huge answers at once.

Each is met by ``pooler`` as a real process, against the reference store or a stand-in store.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from helpers import ROOT, Store, answer_of, environment, pooler, serve
from test_answer_kinds import GOOD, Scripted, goods, strict, write_pool
from test_answer_kinds import run as run_task
from test_faults_run import run_measured
from test_mcp import answer_of as mcp_answer
from test_mcp import connect_in_process

TEST = "MELBIS_AGENT_TEST"


def journal_rows(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM calls ORDER BY id")]


def task_status(path: Path, task: str) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return str(db.execute("SELECT status FROM tasks WHERE id = ?", (task,)).fetchone()[0])


def stopped_run(url: str, tmp_path: Path, pool: Path, arrived: threading.Event, *extra: str
                ) -> tuple[int, str, str]:
    """``pooler run`` sent SIGTERM once the store has its first call: exit status, stdout, stderr.

    It must end well within 30 s, although the store would keep it a minute or more.
    """
    token = tmp_path / "token"
    token.write_text("demo\n", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pooler", "run", str(pool), "--store", url, "--token-file", str(token),
         "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "j.sqlite"), "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=environment())
    try:
        assert arrived.wait(60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


# 8. A call that cannot be encoded fails alone, and is never recorded as sent.

def test_a_value_json_cannot_carry_fails_its_call_alone_and_is_never_marked_sent(store: Store,
                                                                                tmp_path: Path) -> None:
    # Rows of a for_each file are read whole before the run (a NaN there refuses the pool); a
    # {"file": ...} field of params is read when its call is made, so its NaN meets the call itself.
    (tmp_path / "odd.jsonl").write_text('{"m": NaN}\n', encoding="utf-8")
    pool = write_pool(tmp_path, [
        {"name": "one", "unit": TEST, "command": "CmdEcho", "key": "k1", "params": {"m": 1}},
        {"name": "odd", "unit": TEST, "command": "CmdEcho", "key": "k2",
         "params": {"m": 2, "rows": {"file": "odd.jsonl"}}},
        {"name": "three", "unit": TEST, "command": "CmdEcho", "key": "k3", "params": {"m": 3}},
    ], stop_on_error=False)
    proc = run_task(store.url, tmp_path, pool)
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    assert [s["status"] for s in answer["steps"]] == ["completed", "failed", "completed"]
    assert "NaN" in answer["steps"][1]["message"], answer["steps"][1]["message"]
    assert [op["params"]["m"] for op in store.ops()] == [1, 3]
    journal = tmp_path / "journal.sqlite"
    assert task_status(journal, "T1") != "running"
    # Never sent: no "sent" record, so --in-doubt skip cannot count it done.
    rows = journal_rows(journal)
    assert [(r["status"], r["sent_ms"]) for r in rows if r["num"] == 2] == [("failed", None)]
    assert all(r["sent_ms"] is not None for r in rows if r["num"] != 2), rows
    again = run_task(store.url, tmp_path, pool, "--in-doubt", "skip")
    assert [s["status"] for s in answer_of(again)["steps"]] == ["skipped", "failed", "skipped"]


# 9. A deep answer is in doubt (tested with the other kinds); a dripping one meets the deadline.

class Drip(BaseHTTPRequestHandler):
    """Headers at once, then the body one byte every half second (two minutes and more)."""

    protocol_version = "HTTP/1.1"
    arrived: ClassVar[threading.Event] = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = GOOD + b" " * 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        type(self).arrived.set()
        try:
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            return


@pytest.fixture
def drip() -> Iterator[tuple[str, type[Drip]]]:
    handler = type("Handler", (Drip,), {"arrived": threading.Event()})
    with serve(handler) as url:
        yield url, handler


def test_a_dripping_answer_meets_the_calls_deadline(drip: tuple[str, type[Drip]], tmp_path: Path) -> None:
    url, _ = drip
    # The whole answer would take minutes; the run must not wait anywhere near that long for it.
    proc = run_task(url, tmp_path, write_pool(tmp_path, [goods()]), "--timeout", "2", timeout=30)
    assert proc.returncode == 1, proc.stderr
    entry = answer_of(proc)["steps"][0]
    assert (entry["status"], entry["message"]) == (
        "in_doubt", (f"the store at {url}/ did not finish its answer within 2 s; the call may or may not "
                     "have been carried out"))


@pytest.mark.process
def test_sigterm_during_a_dripping_answer_ends_the_run_by_the_deadline(drip: tuple[str, type[Drip]],
                                                                      tmp_path: Path) -> None:
    url, handler = drip
    pool = write_pool(tmp_path, [goods(), {**goods(), "name": "second", "key": "goods-G2"}])
    status, out, err = stopped_run(url, tmp_path, pool, handler.arrived, "--timeout", "3")
    assert status == 143, err
    answer = json.loads(out)
    assert [e["status"] for e in answer["steps"]] == ["in_doubt"]


# 10. Numbers JSON cannot carry never reach output or files as NaN or Infinity.

ODD = (b'{"ok": true, "ms": 1, "data": {"result": true, "message": "", '
       b'"detail": {"big": 1e999, "small": -1e999, "nan": NaN, "inf": Infinity, "ok": 1.5}, '
       b'"tables": {"t": [{"x": 1e999}, {"x": NaN}]}}}')
ODD_DETAIL = {"big": "1e999", "small": "-1e999", "nan": "NaN", "inf": "Infinity", "ok": 1.5}


def test_numbers_json_cannot_carry_are_strings_in_output_tables_and_journal(tmp_path: Path) -> None:
    handler = type("Handler", (Scripted,), {"answers": [(200, {}, ODD)], "keys": [],
                                            "arrived": threading.Event()})
    with serve(handler) as url:
        proc = run_task(url, tmp_path, write_pool(tmp_path, [goods()]))
    assert proc.returncode == 0, proc.stderr
    answer = strict(proc.stdout)
    entry = answer["steps"][0]
    assert entry["detail"] == ODD_DETAIL
    lines = Path(entry["tables"]["t"]["file"]).read_text(encoding="utf-8").splitlines()
    assert [strict(line) for line in lines] == [{"x": "1e999"}, {"x": "NaN"}]
    for row in journal_rows(tmp_path / "journal.sqlite"):
        for column in ("result", "detail"):
            if row[column] is not None:
                strict(row[column])
    shown = pooler("show", "T1", "--journal", str(tmp_path / "journal.sqlite"), "--json")
    assert strict(shown.stdout)["steps"][0]["detail"] == ODD_DETAIL


def test_numbers_json_cannot_carry_are_strings_in_mcp_answers(tmp_path: Path) -> None:
    handler = type("Handler", (Scripted,), {"answers": [(200, {}, ODD)], "keys": [],
                                            "arrived": threading.Event()})
    found: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect_in_process(stand_in, tmp_path / "out") as session:
            result = await session.call_tool("tool_run", {"unit": TEST, "command": "CmdEcho"})
            found["text"] = result.content[0].text  # type: ignore[union-attr]
            found["answer"] = mcp_answer(result)

    with serve(handler) as url:
        stand_in = Store(url=url, proc=None, db=tmp_path / "none", root=tmp_path, token="stand-in-token")  # type: ignore[arg-type]
        anyio.run(scenario)
    assert strict(found["text"])["detail"] == ODD_DETAIL


# 11. 401/403/429/503 say their status; 429 and 503 with Retry-After are waited for.

@pytest.mark.parametrize(("status", "headers", "body", "message"), [
    (401, {}, b'{"ok": false, "error": "ACCESS_DENIED: who?"}',
     "ACCESS_DENIED: who? (HTTP 401 Unauthorized)"),
    (403, {"Content-Type": "text/html"}, b"Forbidden", "Forbidden (HTTP 403 Forbidden)"),
    (429, {}, b"", "the store answered HTTP 429 Too Many Requests with no text"),
    (503, {"Content-Type": "text/plain"}, b"down for maintenance",
     "down for maintenance (HTTP 503 Service Unavailable)"),
])
def test_messages_of_refusing_statuses_carry_the_status(tmp_path: Path, status: int, headers: dict[str, str],
                                                         body: bytes, message: str) -> None:
    handler = type("Handler", (Scripted,), {"answers": [(status, headers, body)] * 3, "keys": [],
                                            "arrived": threading.Event()})
    with serve(handler) as url:
        # busy_for 0: a busy answer is not sent again, so its message is the answer's.
        proc = run_task(url, tmp_path, write_pool(tmp_path, [goods(retry={"attempts": 1, "busy_for": 0})]))
    assert answer_of(proc)["steps"][0]["message"] == message


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_waited_for_and_the_call_sent_again(tmp_path: Path, status: int) -> None:
    handler = type("Handler", (Scripted,), {"answers": [(status, {"Retry-After": "1"}, b"busy")] * 2,
                                            "keys": [], "arrived": threading.Event()})
    with serve(handler) as url:
        proc = run_task(url, tmp_path, write_pool(tmp_path, [goods()]))
    assert proc.returncode == 0, proc.stderr
    assert answer_of(proc)["steps"][0]["status"] == "completed"
    # Not carried out, so safe to send again: with the same key, within the run.
    assert handler.keys == ["T1:goods-G1"] * 3


@pytest.mark.process
def test_a_stop_cuts_a_retry_after_wait_short(tmp_path: Path) -> None:
    handler = type("Handler", (Scripted,), {"answers": [(429, {"Retry-After": "60"}, b"busy")] * 3,
                                            "keys": [], "arrived": threading.Event()})
    with serve(handler) as url:
        # The store asks for a minute; the stop must not wait it out.
        status, out, err = stopped_run(url, tmp_path, write_pool(tmp_path, [goods()]), handler.arrived)
    assert status == 143, err
    entry = json.loads(out)["steps"][0]
    # Not carried out: not run, for a redrive to send.
    assert (entry["status"], entry["message"]) == ("not_run", "busy (HTTP 429 Too Many Requests)")
    assert len(handler.keys) == 1


# 15. The answers of all calls in flight are capped together, not only each one.

@pytest.mark.process
def test_many_huge_answers_side_by_side_are_held_in_bounded_memory_together(store_factory: Any,
                                                                             tmp_path: Path) -> None:
    store = store_factory("--fault", "huge:1")
    token = tmp_path / "token"
    token.write_text(store.token + "\n", encoding="utf-8")
    steps = [{"name": f"s{n}", "unit": TEST, "command": "CmdEcho", "params": {"m": n}} for n in range(16)]
    pool = write_pool(tmp_path, steps, mode="parallel", max_concurrency=16)
    status, peak_kib, out, err = run_measured(
        ["run", str(pool), "--store", store.url, "--token-file", str(token), "--out", str(tmp_path / "out"),
         "--journal", str(tmp_path / "journal.sqlite"), "--json"], tmp_path)
    assert status == 0, err
    assert [e["status"] for e in json.loads(out)["steps"]] == ["completed"] * 16
    # Sixteen 50 MB answers read side by side took over 1 GB; one alone takes about 300 MB.
    assert peak_kib < 600 * 1024, f"peak {peak_kib} KiB"
