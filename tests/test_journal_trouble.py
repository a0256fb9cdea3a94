"""A SQLite journal that fails under a running task: a full disk (a real 2 MB tmpfs), a file
deleted mid-run.  The run stops at once, and what it reports accounts for every call that left:
recorded as it was, or in doubt when its outcome did not reach the journal, never not run.  The
store's own operations are counted against it."""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import Store
from sharedkit import finish, query, start_runner, wait_for, write_pool

from pooler.plural import plural

ROWS = 3000


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 2 MB tmpfs, mounted for the test and unmounted after it (outside the test's own folder,
    which PostgreSQL's server user cannot enter)."""
    folder = Path(tempfile.mkdtemp(prefix="pooler-small-"))
    folder.chmod(0o755)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip(f"a 2 MB tmpfs cannot be mounted here (mount said: {mounted.stderr.strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        folder.rmdir()


def adds(store: Store) -> int:
    return sum(1 for op in store.ops() if op["command"] == "CmdAdd")


def sleeps(store: Store) -> int:
    return sum(1 for op in store.ops() if op["command"] == "CmdSleep")


def import_pool(folder: Path, rows: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"G{i},Goods {i},{i}.5\n" for i in range(rows))
    (folder / "goods.csv").write_text("sku,name,price\n" + lines)
    return write_pool(folder, [
        "stop_on_error: false", "mode: parallel", "max_concurrency: 8", "pool:",
        "  - name: add", "    unit: MELBIS_AGENT_STORE", "    command: CmdAdd",
        "    for_each: {file: goods.csv}", "    key: goods-${row.sku}",
        "    params: {sku: '${row.sku}', name: '${row.name}', price: '${row.price}'}"])


@contextlib.contextmanager
def journal_on(kind: str, disk: Path) -> Iterator[tuple[str, Callable[[str], int]]]:
    """A journal whose calls are kept on ``disk``: a SQLite file there, or a PostgreSQL cluster of
    its own whose work table is in a tablespace there; with a way to count its calls by a WHERE."""
    if kind == "sqlite":
        path = disk / "journal.db"

        def count(where: str) -> int:
            with sqlite3.connect(path) as db:
                return int(db.execute(f"SELECT count(*) FROM work WHERE {where}").fetchone()[0])

        yield str(path), count
        return
    psycopg = pytest.importorskip("psycopg")
    from pg_server import start_server  # noqa: PLC0415

    from pooler.journal.postgres.schema import upgrade  # noqa: PLC0415

    server = start_server()
    try:
        shutil.chown(disk, "postgres", "postgres")
        url = server.new_database("small")
        upgrade(url)
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"CREATE TABLESPACE small LOCATION '{disk}'")
            db.execute("ALTER TABLE work SET TABLESPACE small")
            # Every version a call's row leaves stays: the disk fills within the run, whatever
            # autovacuum would have made room for meanwhile.
            db.execute("ALTER TABLE work SET (autovacuum_enabled = false)")
        yield url, lambda where: int(query(url, f"SELECT count(*) FROM work WHERE {where}")[0][0])
    finally:
        server.close()


@pytest.mark.process
@pytest.mark.parametrize("kind", [pytest.param("sqlite", id="sqlite"),
                                  pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)])
def test_a_full_journal_disk_stops_the_run_and_its_answer_gives_every_call_sent_one_status(
        kind: str, store: Store, tmp_path: Path, small_disk: Path) -> None:
    pool = import_pool(tmp_path / "pools", ROWS)
    with journal_on(kind, small_disk) as (journal, count):
        code, answer, err = finish(start_runner(pool, store, journal, "t", tmp_path / "out"), timeout=600)
        assert code == 1, err
        assert re.search(r"(database or disk is full|No space left on device).* - this runner stopped "
                         "sending", err), err
        sent = adds(store)
        assert 0 < sent < ROWS
        assert answer is not None
        # Every call that left is in the answer once: completed, or in doubt when the journal could
        # not take its outcome; the rest were not sent.
        assert answer["succeeded"] + answer["failed"] == sent, answer
        assert (answer["not_run"], answer["total"]) == (ROWS - sent, ROWS)
        assert answer["failed"] == answer["calls_in_doubt"] == len(answer["in_doubt"])
        assert f"pooler: the run stopped after {plural(sent, 'call')} had been sent;" in err
        doubt = answer["calls_in_doubt"]
        told = re.search(r"this runner stopped sending; (\d+) call\(s\) it sent end in doubt, their outcome "
                         r"not recorded \((\d+) answered, (\d+) in flight\)", err)
        if doubt:
            assert told is not None, err
            assert int(told[1]) == int(told[2]) + int(told[3]) == doubt
        else:
            assert "this runner stopped sending; every call it sent is recorded." in err
        # The journal, read afterwards, tells the same calls: those it holds as sent are in doubt.
        assert (count("status = 'completed'"), count("state = 'sent'")) == (answer["succeeded"], doubt)


@pytest.mark.process
def test_a_journal_deleted_under_a_run_stops_it_at_its_next_write_and_says_so(store: Store,
                                                                             tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    pool = write_pool(tmp_path / "pools", ["pool:"] + [
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {{ms: {100 + i}}}, key: k{i}}}"
        for i in range(40)])
    runner = start_runner(pool, store, str(journal), "t", tmp_path / "out")
    wait_for(lambda: sleeps(store) >= 2, running=[runner])
    for path in tmp_path.glob("journal.db*"):
        path.unlink()
    code, answer, err = finish(runner)
    assert code == 1, err
    assert (f"pooler: the journal {journal} was deleted or replaced while this run used it - what the run "
            "records would be lost with the file - this runner stopped sending;") in err
    sent = sleeps(store)
    assert sent < 40
    assert answer is not None
    # The answer read from the file the run still holds open, every call that left told once.
    assert answer["succeeded"] + answer["failed"] == sent, answer
    assert answer["not_run"] == 40 - sent
    assert not journal.exists()
