"""Every kind of answer, met by ``pooler run`` and then by a rerun of the same task.

Only an answer that proves the command was not carried out (the store's refusal, a 401/403, a
429) lets the rerun send the key under a new round, a new Idempotency-Key the store takes for a
new call.  After any other answer the command may have run: the rerun sends the same key, and a
store that honours keys answers it from its first try, so the command runs once.  Kinds the
reference store's ``--fault`` modes give are met there (its ops counted); the others come from a
stand-in store in the test that records the keys it was sent.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import ROOT, STORE_TOKEN, Store, answer_of, pooler, serve

from pooler.client import answer_kinds
from pooler.journal.sqlite.tasks import SqliteTaskJournal as Journal

TEST = "MELBIS_AGENT_TEST"
GOOD = b'{"ok": true, "ms": 1, "data": {"result": true, "message": "done", "detail": {"id": 7}}}'
IN_DOUBT = "the call may or may not have been carried out"


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not strict JSON")


def strict(text: str) -> Any:
    """What a strict JSON parser makes of ``text`` (NaN and Infinity refused)."""
    return json.loads(text, parse_constant=no_constant)


def write_pool(folder: Path, steps: list[dict[str, Any]], **options: Any) -> Path:
    path = folder / "pool.json"
    path.write_text(json.dumps({**options, "pool": steps}), encoding="utf-8")
    return path


def goods(**extra: Any) -> dict[str, Any]:
    return {"name": "goods", "unit": TEST, "command": "CmdEcho", "key": "goods-G1",
            "params": {"m": "G1"}, **extra}


def run(url: str, tmp_path: Path, pool: Path, *extra: str, token: str = STORE_TOKEN, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n", encoding="utf-8")
    return pooler("run", str(pool), "--store", url, "--token-file", str(token_file),
                  "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "journal.sqlite"),
                  "--task", "T1", "--json", *extra, timeout=timeout)


# The reference store's faults: first run faulty, rerun against the same data sound.

@pytest.mark.parametrize(("fault", "ran_first"), [
    ("garbage", 1),   # the command ran, then the answer was not JSON
    ("crash", 0),     # HTTP 500 text (before the command: pooler cannot know)
    ("reset", 1),
    ("truncate", 1),
])
def test_after_an_answer_that_may_have_run_the_rerun_sends_the_same_key_and_the_command_runs_once(
        store_factory: Any, tmp_path: Path, fault: str, ran_first: int) -> None:
    db, root = tmp_path / "shared.db", tmp_path / "shared-root"
    faulty: Store = store_factory("--fault", f"{fault}:1", db=db, root=root)
    pool = write_pool(tmp_path, [goods()])
    first = run(faulty.url, tmp_path, pool)
    assert first.returncode == 1, first.stderr
    assert answer_of(first)["steps"][0]["status"] == "in_doubt"
    assert len(faulty.ops()) == ran_first
    faulty.stop()
    sound: Store = store_factory("--port", faulty.port, db=db, root=root)
    again = run(sound.url, tmp_path, pool)
    assert again.returncode == 0, again.stderr
    assert answer_of(again)["steps"][0]["status"] == "completed"
    # One key, one op: the rerun was answered from the first try's key, or ran it for the first time.
    assert [op["idempotency_key"] for op in sound.ops()] == ["T1:goods-G1"]


def test_a_timeout_is_in_doubt_and_the_rerun_sends_the_same_key(store_factory: Any, tmp_path: Path) -> None:
    db, root = tmp_path / "shared.db", tmp_path / "shared-root"
    slow: Store = store_factory("--fault", "slow:1", "--slow-ms", "3000", db=db, root=root)
    pool = write_pool(tmp_path, [goods()])
    first = run(slow.url, tmp_path, pool, "--timeout", "0.5")
    assert answer_of(first)["steps"][0]["status"] == "in_doubt"
    slow.stop()
    sound: Store = store_factory("--port", slow.port, db=db, root=root)
    again = run(sound.url, tmp_path, pool)
    assert answer_of(again)["steps"][0]["status"] == "completed"
    assert [op["idempotency_key"] for op in sound.ops()] == ["T1:goods-G1"]


def test_a_refusal_is_not_carried_out_and_the_rerun_sends_a_new_key_round(store: Store,
                                                                          tmp_path: Path) -> None:
    pool = write_pool(tmp_path, [{"name": "add", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
                                  "key": "cur-X", "params": {"skey": "XXX"}}])
    first = run(store.url, tmp_path, pool)
    assert answer_of(first)["steps"][0]["status"] == "failed"
    fixed = write_pool(tmp_path, [{"name": "add", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
                                   "key": "cur-X", "params": {"skey": "XXX", "name": "Ex"}}])
    # Its steps changed since the task was planned: the task runs the steps it was planned with.
    refused = run(store.url, tmp_path, fixed, "--replan")
    assert refused.returncode == 2
    assert (f"pooler: --replan plans the rows of task T1 again and keeps its steps, and the steps of {fixed} "
            "differ from those it was planned with - start a new task for them.\n"
            "pooler: refused before the first step; nothing was sent.\n") in refused.stderr
    # The task run again with its own steps sends the refused key anew, under its next round.
    write_pool(tmp_path, [{"name": "add", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
                           "key": "cur-X", "params": {"skey": "XXX"}}])
    assert answer_of(run(store.url, tmp_path, pool))["steps"][0]["status"] == "failed"
    journal = Journal(tmp_path / "journal.sqlite")
    assert [(c["key"], c["round"], c["status"]) for c in journal.calls("T1")] == [
        ("cur-X", 1, "failed"), ("cur-X", 2, "failed")]
    journal.close()
    # The fixed steps are a task of their own: carried out once.
    write_pool(tmp_path, [{"name": "add", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
                           "key": "cur-X", "params": {"skey": "XXX", "name": "Ex"}}])
    fixed_task = run(store.url, tmp_path, fixed, "--task", "T2")
    assert answer_of(fixed_task)["steps"][0]["status"] == "completed"
    assert [op["idempotency_key"] for op in store.ops()] == ["T2:cur-X"]


# A stand-in store: answers from a list, then the good envelope; records every key it was sent.

class Scripted(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: ClassVar[list[tuple[int, dict[str, str], bytes]]] = []
    keys: ClassVar[list[str | None]] = []
    arrived: ClassVar[threading.Event] = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).keys.append(self.headers.get("Idempotency-Key"))
        type(self).arrived.set()
        status, headers, body = type(self).answers.pop(0) if type(self).answers else (200, {}, GOOD)
        self.send_response(status)
        headers = {"Content-Type": "application/json", **headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def scripted() -> Iterator[tuple[str, type[Scripted]]]:
    handler = type("Handler", (Scripted,), {"answers": [], "keys": [], "arrived": threading.Event()})
    with serve(handler) as url:
        yield url, handler


# A secret (the token) deep inside: masking it would walk every level.
DEEP = (b'{"ok": true, "data": {"result": true, "message": "", "detail": '
        + b"[" * 600 + b'"%s"' % STORE_TOKEN.encode() + b"]" * 600 + b"}}")
# Over 64 KB, so its rows are read one at a time as they are written: the deep one among them.
DEEP_ROWS = (b'{"ok": true, "data": {"result": true, "message": "", "tables": {"t": ['
             + b", ".join(b'{"n": %d}' % n for n in range(8000))
             + b", " + b"[" * 600 + b'"%s"' % STORE_TOKEN.encode() + b"]" * 600 + b"]}}}")
IN_DOUBT_ANSWERS = {
    "crash text": (500, {"Content-Type": "text/plain"}, b"MELBIS_AGENT_TEST\\CmdEcho failed: boom"),
    "502": (502, {"Content-Type": "text/html"}, b"<html>502 Bad Gateway</html>"),
    "504": (504, {"Content-Type": "text/html"}, b"<html>504 Gateway Time-out</html>"),
    "503 without Retry-After": (503, {"Content-Type": "text/html"}, b"<html>503</html>"),
    "html": (200, {"Content-Type": "text/html"}, b"<html>hello</html>"),
    "cut JSON": (200, {}, b'{"ok": true, "data": {"result": tr'),
    "not the envelope": (200, {}, b'[1, 2, 3]'),
    "no result": (200, {}, b'{"ok": true, "data": {"message": "hm"}}'),
    "too deep": (200, {}, DEEP),
    "too deep rows": (200, {}, DEEP_ROWS),
}
NOT_RUN_ANSWERS = {
    "refusal": (200, {}, b'{"ok": true, "data": {"result": false, "message": "No."}}'),
    "401": (401, {}, b'{"ok": false, "error": "ACCESS_DENIED: who?"}'),
    "403 html": (403, {"Content-Type": "text/html"}, b"<html>Forbidden</html>"),
}


@pytest.mark.parametrize("name", sorted(IN_DOUBT_ANSWERS))
def test_an_answer_after_which_the_command_may_have_run_is_in_doubt_and_keeps_its_key(
        scripted: tuple[str, type[Scripted]], tmp_path: Path, name: str) -> None:
    url, handler = scripted
    handler.answers.append(IN_DOUBT_ANSWERS[name])
    pool = write_pool(tmp_path, [goods()])
    first = run(url, tmp_path, pool)
    assert first.returncode == 1, first.stderr
    entry = answer_of(first)["steps"][0]
    assert (entry["status"], entry["result"]) == ("in_doubt", False)
    again = run(url, tmp_path, pool)
    assert again.returncode == 0, again.stderr
    assert answer_of(again)["steps"][0]["status"] == "completed"
    assert handler.keys == ["T1:goods-G1", "T1:goods-G1"]


@pytest.mark.parametrize("name", sorted(NOT_RUN_ANSWERS))
def test_an_answer_that_proves_the_command_did_not_run_lets_the_rerun_send_a_new_key_round(
        scripted: tuple[str, type[Scripted]], tmp_path: Path, name: str) -> None:
    url, handler = scripted
    handler.answers.append(NOT_RUN_ANSWERS[name])
    pool = write_pool(tmp_path, [goods()])
    first = run(url, tmp_path, pool)
    assert first.returncode == 1, first.stderr
    assert answer_of(first)["steps"][0]["status"] == "failed"
    sent = len(handler.keys)
    again = run(url, tmp_path, pool)
    assert answer_of(again)["steps"][0]["status"] == "completed"
    assert set(handler.keys[:sent]) == {"T1:goods-G1"}
    assert handler.keys[sent] not in (None, "T1:goods-G1")


@pytest.mark.parametrize("busy", [(429, {"Retry-After": "0"}, b"slow down"),
                                  (503, {"Retry-After": "0.01"}, b"come back later")],
                         ids=["429", "503 with Retry-After"])
def test_a_busy_answer_is_sent_again_under_the_same_key_without_using_an_attempt(
        scripted: tuple[str, type[Scripted]], tmp_path: Path, busy: tuple[int, dict[str, str], bytes]
) -> None:
    url, handler = scripted
    handler.answers.extend([busy] * 3)
    pool = write_pool(tmp_path, [goods(retry={"attempts": 1})])
    done = run(url, tmp_path, pool)
    assert done.returncode == 0, done.stderr
    answer = answer_of(done)
    assert answer["steps"][0]["status"] == "completed"
    # The store kept nothing under the key of a call it turned away at its door.
    assert handler.keys == ["T1:goods-G1"] * 4
    flow = answer["flow"]
    assert (flow["busy"], flow["busy_resent"], flow["busy_not_run"]) == (3, 3, 0)
    # Each came back behind the task's pause: at least a second, however little the store asked.
    assert flow["held_ms"] >= 3 * 900


def test_the_manual_shows_the_table_of_answer_kinds() -> None:
    assert answer_kinds.table() in (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")


class GoneAfterOneAnswer(BaseHTTPRequestHandler):
    """A gateway's answer (the command may have run), and then nothing listens any more."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        # A close alone leaves the port listening while the server's thread still polls it, and
        # the retry would then be accepted and reset (sent, in doubt) rather than refused.
        self.server.socket.shutdown(socket.SHUT_RDWR)
        self.server.socket.close()
        body = b"<html>502 Bad Gateway</html>"
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


def test_a_call_whose_first_try_may_have_run_stays_in_doubt_when_its_retry_cannot_connect(
        tmp_path: Path) -> None:
    with serve(GoneAfterOneAnswer) as url:
        pool = write_pool(tmp_path, [goods(retry={"attempts": 2, "on_in_doubt": True})])
        done = run(url, tmp_path, pool)
    assert done.returncode == 1, done.stderr
    entry = answer_of(done)["steps"][0]
    # The retry never left, but the first try did and its answer proved nothing: not "failed",
    # which a redrive would send under a new key round.
    assert (entry["status"], entry["result"]) == ("in_doubt", False)
    assert entry["message"].endswith(" An earlier try of the call left and its answer was lost; the call may "
                                     "or may not have been carried out.")
