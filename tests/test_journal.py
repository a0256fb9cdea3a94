"""The SQLite journal's file: owner-only, WAL, tasks made with their plan, commits that survive a
kill, one journal shared by threads and opened by processes at once.  The work rows themselves are
tested on both backends by tests/test_work_backends.py."""

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
from pooler.journal.records import default_journal_path
from pooler.journal.sqlite.journal import Journal
from pooler.journal.sqlite.tasks import SqliteTaskJournal
from pooler.run.executor import new_task_id


def make_task(journal: SqliteTaskJournal, task: str, pool: Path, calls: int = 1) -> None:
    """A task of ``pool`` with ``calls`` calls of one step, as a first run plans it."""
    with journal.creating(task, str(pool), {"steps": [], "options": {}}) as write:
        assert write is not None
        for idx in range(calls):
            write((task, 1, idx, "call", idx, None, 1, None, "{}", None, None, True, "ready"))


def test_file_and_folder_are_owner_only_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state" / "deep" / "journal.sqlite"
    with SqliteTaskJournal(path) as journal:
        make_task(journal, "t", tmp_path / "pool.yaml")
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
    made = {new_task_id() for _ in range(5000)}
    assert len(made) == 5000
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", t) for t in made)
    with SqliteTaskJournal(tmp_path / "j.sqlite") as journal:
        make_task(journal, "nightly-1", tmp_path / "pool.yaml")
        # A second run that plans the same task finds it planned: it joins, it does not plan again.
        with journal.creating("nightly-1", str(tmp_path / "pool.yaml"), {"steps": []}) as write:
            assert write is None
        assert journal.planned_calls("nightly-1") == 1


def test_last_unfinished_task_of_a_pool(tmp_path: Path) -> None:
    pool = str(tmp_path / "pool.yaml")
    with SqliteTaskJournal(tmp_path / "j.sqlite") as journal:
        assert journal.last_unfinished(pool) is None
        make_task(journal, "done", tmp_path / "pool.yaml")
        journal.finish_task("done", {"status": "completed", "total": 1, "succeeded": 1})
        assert journal.last_unfinished(pool) is None
        make_task(journal, "killed", tmp_path / "pool.yaml")
        assert journal.last_unfinished(pool) == "killed"
        assert journal.last_unfinished(str(tmp_path / "other.yaml")) is None
        journal.finish_task("killed", {"status": "partial", "total": 2, "succeeded": 1, "failed": 1})
        assert journal.last_unfinished(pool) == "killed"
        journal.finish_task("killed", {"status": "completed", "total": 2, "succeeded": 2})
        assert journal.last_unfinished(pool) is None


def test_answers_and_the_task_list(tmp_path: Path) -> None:
    with SqliteTaskJournal(tmp_path / "j.sqlite") as journal:
        first, second = "first", "second"
        make_task(journal, first, tmp_path / "a.yaml")
        make_task(journal, second, tmp_path / "b.yaml")
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


def test_a_call_gated_is_committed_before_it_leaves_and_survives_a_kill(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    code = (
        "import os, signal, sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from pathlib import Path\n"
        "from test_journal import make_task\n"
        "from pooler.journal.sqlite.tasks import SqliteTaskJournal\n"
        "j = SqliteTaskJournal(sys.argv[1])\n"
        "make_task(j, 'killed', Path(sys.argv[2]), calls=2)\n"
        "lease = j.lease('killed', 30, None)\n"
        "work = j.work('killed', lease.id)\n"
        "first, second = work.claim(2, 2, lambda r, e: None, lambda r, d, s: None)\n"
        "assert work.gate(first, 'k1', 'killed-1-0-1', 1)\n"
        "assert work.done(first, 'completed', {'num': 1, 'status': 'completed'}, {'id': 5}, doubt=None)\n"
        "assert work.gate(second, 'k2', 'killed-1-1-1', 1)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    pool = tmp_path / "pool.yaml"
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(pool)], check=False,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == -signal.SIGKILL
    # Another process (this one) sees what was committed before the kill: one call done, one sent.
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT idx, state, status FROM work WHERE task = 'killed' ORDER BY idx").fetchall()
    assert rows == [(0, "done", "completed"), (1, "sent", None)]
    with SqliteTaskJournal(path) as journal:
        assert journal.last_unfinished(str(pool)) == "killed"
        counts = journal.plan_counts("killed")
        assert counts is not None
        assert (counts.planned, counts.completed, counts.in_doubt) == (2, 1, 1)


def test_threads_share_one_journal(tmp_path: Path) -> None:
    with SqliteTaskJournal(tmp_path / "j.sqlite") as journal:
        make_task(journal, "t", tmp_path / "pool.yaml", calls=800)
        lease = journal.lease("t", 30, None)
        work = journal.work("t", lease.id)

        def take() -> None:
            while rows := work.claim(10, 800, lambda r, e: None, lambda r, d, s: None, tidy=False):
                for row in rows:
                    assert work.gate(row, None, f"t-1-{row.idx}-1", 1)
                    entry = {"num": 1, "status": "completed", "detail": {"i": row.idx}}
                    assert work.done(row, "completed", entry, {"i": row.idx}, doubt=None)

        threads = [threading.Thread(target=take) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        lease.close()
        calls = journal.calls("t")
        assert len(calls) == 800
        assert {c["detail"]["i"] for c in calls} == set(range(800))


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
    with SqliteTaskJournal(path) as journal:
        make_task(journal, "t", Path("/p.yaml"))
        assert journal.planned_calls("t") == 1


@pytest.mark.parametrize("opener", ["open_existing", "open_store_buckets"])
def test_a_postgresql_journal_without_psycopg_installed_says_how_to_install_it(opener: str) -> None:
    # psycopg made unimportable in the child, as on a machine without the postgres extra.
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from pooler.errors import JournalError\n"
            f"from pooler.journal.opening import {opener}\n"
            f"try: {opener}('postgresql://postgres@127.0.0.1:1/none')\n"
            "except JournalError as exc: print(exc.message)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0, "a PostgreSQL journal needs psycopg: pip install 'pooler[postgres]'\n", "")


def test_pooler_runs_on_a_postgresql_journal_without_psycopg_says_how_to_install_it() -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from pooler.cli.main import main\n"
            "sys.exit(main(['runs', '--journal', 'postgresql://postgres@127.0.0.1:1/none']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", "pooler: a PostgreSQL journal needs psycopg: pip install 'pooler[postgres]'\n")
