"""The journal: files owner-only, WAL, tasks, keys, and commits that survive a kill."""

from __future__ import annotations

import multiprocessing
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_keys_tasks import OLD_SCHEMA

from pooler.errors import JournalError
from pooler.journal.records import CallId, default_journal_path
from pooler.journal.sqlite.journal import Journal


def ids(task: str, num: int, key: str | None, row: int | None = None, run: int = 1) -> CallId:
    return CallId(task, run, num, row, key, f"{task}-{num}-{run}")


def test_file_and_folder_are_owner_only_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state" / "deep" / "journal.sqlite"
    with Journal(path) as journal:
        journal.new_task(tmp_path / "pool.yaml")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for side in path.parent.glob("journal.sqlite-*"):
        assert stat.S_IMODE(side.stat().st_mode) == 0o600
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_path_follows_xdg_state_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_journal_path() == tmp_path / "xdg" / "pooler" / "journal.sqlite"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_journal_path() == tmp_path / "home" / ".local" / "state" / "pooler" / "journal.sqlite"


def test_task_ids_are_readable_and_unique(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite") as journal:
        made = {journal.new_task(tmp_path / "pool.yaml") for _ in range(50)}
        assert len(made) == 50
        assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", t) for t in made)
        assert journal.new_task(tmp_path / "pool.yaml", "nightly-1") == "nightly-1"
        with pytest.raises(JournalError) as caught:
            journal.new_task(tmp_path / "pool.yaml", "nightly-1")
        assert caught.value.message == ("the task nightly-1 is already in the journal - give a new id, "
                                        "or run it again with --task to continue it.")


def test_open_task_counts_runs_and_refuses_unknown_ids(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite") as journal:
        task = journal.new_task(tmp_path / "pool.yaml")
        assert journal.open_task(task) == 2
        assert journal.open_task(task) == 3
        row = journal.task(task)
        assert row is not None
        assert (row.runs, row.status) == (3, "running")
        assert row.pool_file == str((tmp_path / "pool.yaml").resolve())
        with pytest.raises(JournalError) as caught:
            journal.open_task("nope")
        assert caught.value.message == (f"no task nope in the journal {tmp_path / 'j.sqlite'} - "
                                        "`pooler runs` lists the tasks it holds.")


def test_keyed_gives_the_last_record_of_every_key(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite") as journal:
        task = journal.new_task(tmp_path / "pool.yaml")
        other = journal.new_task(tmp_path / "pool.yaml")
        first = journal.record_sent(ids(task, 1, "a"))
        journal.record_done(first, "failed", {"result": False})
        second = journal.record_sent(ids(task, 1, "a", run=2))
        journal.record_done(second, "completed", {"result": True, "message": "", "detail": {"id": 7},
                                                  "time": {}})
        journal.record_sent(ids(task, 2, "b"))  # the answer never came
        journal.record(ids(task, 3, "c"), "not_run")
        journal.record(ids(task, 4, None), "completed", {"result": True, "detail": {}}, sent=True)
        journal.record(ids(other, 1, "a"), "completed", {"result": True, "detail": {"id": 1}}, sent=True)
        keyed = journal.keyed(task)
    assert set(keyed) == {"a", "b"}
    assert keyed["a"].done
    assert keyed["a"].detail == {"id": 7}
    # The detail is kept once, in a column of its own, and comes back in its place.
    assert list(keyed["a"].result or {}) == ["result", "message", "detail", "time"]
    assert keyed["a"].step_id == f"{task}-1-2"
    assert keyed["b"].doubtful
    assert not keyed["b"].done
    assert keyed["b"].status == "sent"


def test_last_unfinished_task_of_a_pool(tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    with Journal(tmp_path / "j.sqlite") as journal:
        assert journal.last_unfinished(pool) is None
        done = journal.new_task(pool)
        journal.finish_task(done, {"status": "completed", "total": 1, "succeeded": 1})
        assert journal.last_unfinished(pool) is None
        killed = journal.new_task(pool)
        assert journal.last_unfinished(pool) == killed
        assert journal.last_unfinished(tmp_path / "other.yaml") is None
        journal.finish_task(killed, {"status": "partial", "total": 2, "succeeded": 1, "failed": 1})
        assert journal.last_unfinished(pool) == killed
        journal.open_task(killed)
        journal.finish_task(killed, {"status": "completed", "total": 2, "succeeded": 2})
        assert journal.last_unfinished(pool) is None


def test_answers_and_the_task_list(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite") as journal:
        first = journal.new_task(tmp_path / "a.yaml")
        second = journal.new_task(tmp_path / "b.yaml")
        assert journal.answer(first) is None
        answer = {"result": True, "status": "completed", "total": 2, "succeeded": 2, "failed": 0,
                  "skipped": 0, "not_run": 0, "steps": [{"num": 1, "message": "ё"}]}
        journal.finish_task(first, answer)
        assert journal.answer(first) == answer
        rows = journal.tasks()
        assert [r.id for r in rows] == [second, first]
        assert (rows[1].status, rows[1].total, rows[1].succeeded, rows[1].finished is not None) == (
            "completed", 2, 2, True)
        assert (rows[0].status, rows[0].finished) == ("running", None)
        assert [r.id for r in journal.tasks(limit=1)] == [second]
        assert journal.answer("nope") is None


def test_a_sent_row_is_committed_before_the_call_leaves(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    with Journal(path) as journal:
        task = journal.new_task(tmp_path / "pool.yaml")
        journal.record_sent(ids(task, 1, "k"))
        # Another connection (another process, after a kill) sees it at once.
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT status, key FROM calls").fetchall() == [("sent", "k")]


def test_commits_survive_a_kill(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    code = (
        "import os, signal, sys\n"
        "from pooler.journal.sqlite.journal import Journal\n"
        "from pooler.journal.records import CallId\n"
        "j = Journal(sys.argv[1])\n"
        "t = j.new_task(sys.argv[2], 'killed')\n"
        "r = j.record_sent(CallId(t, 1, 1, None, 'k1', 'killed-1-1'))\n"
        "j.record_done(r, 'completed', {'result': True, 'detail': {'id': 5}})\n"
        "j.record_sent(CallId(t, 1, 2, None, 'k2', 'killed-2-1'))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    pool = tmp_path / "pool.yaml"
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(pool)], check=False,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == -signal.SIGKILL
    with Journal(path) as journal:
        keyed = journal.keyed("killed")
        assert keyed["k1"].done
        assert keyed["k1"].detail == {"id": 5}
        assert keyed["k2"].doubtful
        assert journal.last_unfinished(pool) == "killed"


def test_threads_share_one_journal(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite") as journal:
        task = journal.new_task(tmp_path / "pool.yaml")

        def work(n: int) -> None:
            for i in range(100):
                rec = journal.record_sent(ids(task, n, f"{n}-{i}", row=i))
                journal.record_done(rec, "completed", {"result": True, "detail": {"i": i}})

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        keyed = journal.keyed(task)
        assert len(keyed) == 800
        assert all(r.done for r in keyed.values())
        calls = journal.calls(task)
        assert len(calls) == 800
        assert calls[0]["result"] == {"result": True, "detail": {"i": 0}}
        assert calls[0]["detail"] == {"i": 0}


def test_an_unwritable_place_is_a_journal_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(JournalError) as caught:
        Journal(blocker / "j.sqlite")
    assert caught.value.message.startswith(f"cannot create the journal {blocker / 'j.sqlite'}: ")
    assert caught.value.message.endswith(" - give another file with --journal.")
    assert blocker.read_text() == "x"


def _open_at_the_barrier(path: str, barrier: Any, errors: Any) -> None:
    barrier.wait()
    try:
        Journal(path).close()
    except JournalError as exc:
        errors.put(exc.message)


@pytest.mark.parametrize("made", ["new", "older"])
def test_processes_opening_one_journal_at_once_all_open_it(tmp_path: Path, made: str) -> None:
    # Each opener adds the columns a journal lacks: without taking turns, the second ALTER TABLE
    # failed with "duplicate column name" and its run was refused.
    path = tmp_path / "j.sqlite"
    if made == "older":
        db = sqlite3.connect(path)
        db.executescript(OLD_SCHEMA)
        db.close()
    context = multiprocessing.get_context("fork")
    barrier, errors = context.Barrier(8), context.Queue()
    openers = [context.Process(target=_open_at_the_barrier, args=(str(path), barrier, errors))
               for _ in range(8)]
    for opener in openers:
        opener.start()
    for opener in openers:
        opener.join(60)
    assert [opener.exitcode for opener in openers] == [0] * 8
    assert errors.empty(), errors.get()
    with Journal(path) as journal:
        assert journal.new_task("/p.yaml", "t") == "t"
