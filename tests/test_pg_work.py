"""The store of record of a shared task on a real PostgreSQL: schema version, claims, leases, the
send gate, taking calls back from an expired runner, the task-wide cap, serialize_on order and
references."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import pooler

from pooler.errors import JournalError
from pooler.journal.postgres.journal import PgJournal
from pooler.journal.postgres.schema import SCHEMA_VERSION, connect, upgrade
from pooler.journal.work import RunnerLease as Lease
from pooler.journal.work import Settled, WorkRow, WorkStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def journal(pg_url: str) -> Iterator[PgJournal]:
    upgrade(pg_url)
    with PgJournal(pg_url) as j:
        yield j


def plan(journal: PgJournal, task: str, rows: list[tuple[int, int, list[int], str | None]]) -> None:
    """A task whose calls are (num, idx, deps, serial); a plan's COPY values give deps as their text."""
    work = [(task, num, idx, "call", idx, None, 1, None, "{" + ",".join(map(str, deps)) + "}", serial,
             None, None, "ready") for num, idx, deps, serial in rows]
    with journal.creating(task, "/pool.yaml", {"steps": []}) as write:
        assert write is not None
        for row in work:
            write(row)


def never(row: WorkRow, expired: bool) -> Settled | None:
    raise AssertionError(f"no call should be in doubt: {row}")


def blocked(row: WorkRow, dep: int, status: str) -> Settled:
    return Settled("not_run", {"num": row.num, "status": "not_run", "why": f"{dep} {status}"})


def runner(journal: PgJournal, task: str, lease: float = 30) -> tuple[Lease, WorkStore]:
    held = journal.lease(task, lease, None)
    return held, journal.work(task, held.id)


def claim(work: WorkStore, n: int = 10, cap: int = 100, on_doubt: Any = never) -> list[tuple[int, int]]:
    return [(r.num, r.idx) for r in work.claim(n, cap, on_doubt, blocked)]


def finish(work: WorkStore, num: int, idx: int, status: str = "completed") -> None:
    row = WorkRow(num, idx, "call", idx, None, 1, None, [], None, 1, None, None, None)
    assert work.gate(row, None, f"s{num}-{idx}", 1)
    assert work.done(row, status, {"num": num, "status": status}, None, doubt=None)


def expire(journal: PgJournal, lease: Lease) -> None:
    """The lease runs out now (as the database's clock sees it)."""
    lease._stop.set()
    journal.query("UPDATE runners SET lease_until = now() - interval '1 second' WHERE id = %s", (lease.id,))


def test_upgrade_creates_then_reports_the_version(pg_url: str) -> None:
    made = pooler("journal", "upgrade", "--journal", pg_url)
    again = pooler("journal", "upgrade", "--journal", pg_url)
    assert (made.returncode, again.returncode) == (0, 0)
    assert made.stdout == f"created the journal {pg_url} (schema version {SCHEMA_VERSION})\n"
    assert again.stdout == f"the journal {pg_url} is at schema version {SCHEMA_VERSION} already\n"


def test_a_journal_of_another_version_is_refused_with_a_message(pg_url: str, tmp_path: Path) -> None:
    missing = pooler("runs", "--journal", pg_url)
    assert missing.returncode == 2
    assert missing.stderr == (f"pooler: the database {pg_url} holds no pooler journal yet - create it with: "
                              f"pooler journal upgrade --journal {pg_url}\n")
    upgrade(pg_url)
    with connect(pg_url) as conn:
        conn.execute("UPDATE pooler_meta SET value = '99' WHERE name = 'schema_version'")
    newer = pooler("runs", "--journal", pg_url)
    assert newer.returncode == 2
    assert newer.stderr == (f"pooler: the journal {pg_url} has schema version 99, newer than this pooler's "
                            f"{SCHEMA_VERSION} - run a pooler as new as the one that upgraded it\n")
    with pytest.raises(JournalError, match="newer than this pooler"):
        upgrade(pg_url)


def test_a_journal_of_version_2_is_refused_until_upgraded_with_the_runners_widths(pg_url: str) -> None:
    upgrade(pg_url)
    with connect(pg_url) as conn:
        conn.execute("ALTER TABLE runners DROP COLUMN width")
        conn.execute("UPDATE pooler_meta SET value = '2' WHERE name = 'schema_version'")
    older = pooler("runs", "--journal", pg_url)
    assert older.returncode == 2
    assert older.stderr == (f"pooler: the journal {pg_url} has schema version 2, this pooler needs "
                            f"{SCHEMA_VERSION} - "
                            f"upgrade it with: pooler journal upgrade --journal {pg_url} (stop every runner "
                            "of it first)\n")
    upgraded = pooler("journal", "upgrade", "--journal", pg_url)
    assert upgraded.stdout == f"upgraded the journal {pg_url} from schema version 2 to {SCHEMA_VERSION}\n"
    with connect(pg_url) as conn:
        found = conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name = 'runners' "
                             "AND column_name = 'width'").fetchall()
    assert found == [(1,)]


def test_two_runners_never_claim_the_same_call(journal: PgJournal) -> None:
    plan(journal, "t", [(1, i, [], None) for i in range(30)])
    la, a = runner(journal, "t")
    lb, b = runner(journal, "t")
    got_a = claim(a, 7) + claim(a, 7)
    got_b = claim(b, 7) + claim(b, 20)
    assert len(got_a) == 14
    assert len(got_b) == 16
    assert not set(got_a) & set(got_b)
    # File order: the first runner took the first calls.
    assert got_a == [(1, i) for i in range(14)]
    la.close()
    lb.close()


def test_runners_hold_fair_shares_of_the_cap(journal: PgJournal) -> None:
    """Equal parts of the cap, each up to its width; a remainder goes to the first to join."""
    plan(journal, "t", [(1, i, [], None) for i in range(40)])
    leases = [journal.lease("t", 30, width) for width in (None, None, None, 1)]
    works = [journal.work("t", held.id) for held in leases]
    # Cap 8 among widths 8, 8, 8 and 1: the narrow one keeps its 1, the others share 7 as 3, 2, 2.
    assert [len(claim(work, 8, cap=8)) for work in works] == [3, 2, 2, 1]
    # A runner that holds its share gets no more while the others are alive.
    assert claim(works[0], 8, cap=8) == []
    # Alone, a runner takes the whole cap.
    for held in leases[1:]:
        expire(journal, held)
    assert len(claim(works[0], 8, cap=8)) == 5
    for held in leases:
        held.close()


def test_a_runner_joining_a_task_a_live_runner_holds_resets_nothing_and_one_joining_after_it_does(
        journal: PgJournal) -> None:
    plan(journal, "t", [(1, 0, [], None), (1, 1, [], None), (2, 0, [1], None)])
    held, work = runner(journal, "t")
    assert claim(work) == [(1, 0), (1, 1)]
    finish(work, 1, 0)
    finish(work, 1, 1, "failed")
    assert claim(work) == []
    state = "SELECT num, idx, state, status, round FROM work WHERE task = 't' ORDER BY num, idx"
    before = journal.query(state)
    assert before == [(1, 0, "done", "completed", 1), (1, 1, "done", "failed", 1),
                      (2, 0, "done", "not_run", 1)]
    # The runner still holds the task: a runner joining now joins its run as it is.
    assert journal.join("t", "retry") is False
    assert journal.query(state) == before
    held.close()
    # No live runner: a new run, the failed call under its next key round, the one it held back
    # ready, and the one that completed without a key ready too (nothing tells it from a new one).
    assert journal.join("t", "retry") is True
    assert journal.query(state) == [(1, 0, "ready", None, 1), (1, 1, "ready", None, 2),
                                    (2, 0, "ready", None, 1)]
    assert journal.query("SELECT runs, halted FROM tasks WHERE id = 't'") == [(3, None)]
