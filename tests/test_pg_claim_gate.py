"""The claim that also gates, on a real PostgreSQL: a call handed out moves to sent (its step id and
fencing epoch) in the round trip that claims it and records the call before it, only under a live
lease and an unhalted task, within the cap, the fair share and serialize_on order; a runner whose
key material differs gates it again; a sequential keyed task costs one transaction a call, its
statements each planned once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from helpers import Store, pooler
from sharedkit import query, token_file, wait_for, write_pool

from pooler.journal.postgres.journal import PgJournal
from pooler.journal.postgres.schema import upgrade
from pooler.journal.work import Done, Settled, WorkRow, WorkStore
from pooler.journal.work import RunnerLease as Lease
from pooler.pool.loader import load_pool
from pooler.run.config import RunConfig
from pooler.run.join import join_task

pytestmark = pytest.mark.postgres
#: The run of the task the runners send in.
RUN = 1


@pytest.fixture
def journal(pg_url: str) -> Iterator[PgJournal]:
    upgrade(pg_url)
    with PgJournal(pg_url) as j:
        yield j


def plan(journal: PgJournal, rows: list[tuple[int, int, str | None, str | None]]) -> None:
    """Task ``t`` whose calls are (num, idx, serial, the key the plan holds): ``?`` for a key it does
    not hold (a plan made before plans held keys), None for a step without a key."""
    work = [("t", num, idx, "call", idx, None, 1, None, "{}", serial, None if key == "?" else key,
             None if key == "?" else True, "ready") for num, idx, serial, key in rows]
    with journal.creating("t", "/pool.yaml", {"steps": []}) as write:
        assert write is not None
        for row in work:
            write(row)


def never(row: WorkRow, expired: bool) -> Settled | None:
    raise AssertionError(f"no call should be in doubt: {row}")


def blocked(row: WorkRow, dep: int, status: str) -> Settled:
    raise AssertionError(f"no call should be blocked: {row}")


def runner(journal: PgJournal, lease: float = 30) -> tuple[Lease, WorkStore]:
    held = journal.lease("t", lease, None)
    return held, journal.work("t", held.id)


def claim(work: WorkStore, n: int = 10, cap: int = 100) -> list[WorkRow]:
    return work.claim(n, cap, never, blocked, tidy=False, gate_run=RUN)


def states(journal: PgJournal) -> list[tuple[int, int, str, str | None, str | None]]:
    return [tuple(r) for r in journal.query(  # type: ignore[misc]
        "SELECT num, idx, state, key_text, step_id FROM work WHERE task = 't' ORDER BY num, idx")]


def expire(journal: PgJournal, lease: Lease) -> None:
    lease._stop.set()
    journal.query("UPDATE runners SET lease_until = now() - interval '1 second' WHERE id = %s", (lease.id,))


def test_the_claim_moves_each_call_whose_key_the_plan_holds_to_sent_under_an_epoch_of_its_own(
        journal: PgJournal) -> None:
    # Step 1 is keyed: its first call's key is planned, its second's is not (a plan made before
    # plans held keys); step 2 has no key.
    plan(journal, [(1, 0, None, "k-0"), (1, 1, None, "?"), (2, 0, None, None)])
    held, work = runner(journal)
    rows = claim(work)
    assert [(r.num, r.idx, r.step_id) for r in rows] == [(1, 0, "t-1-0-1"), (1, 1, None), (2, 0, "t-2-0-1")]
    assert rows[0].epoch is not None
    assert rows[2].epoch is not None
    assert rows[2].epoch > rows[0].epoch
    assert rows[1].epoch is None
    assert states(journal) == [(1, 0, "sent", "k-0", "t-1-0-1"), (1, 1, "claimed", None, None),
                               (2, 0, "sent", None, "t-2-0-1")]
    # The call left claimed goes through the gate of its own.
    assert work.gate(rows[1], "k-1", "t-1-1-1", 1) is not None
    held.close()


def test_the_claim_moves_nothing_to_sent_once_the_lease_expired(journal: PgJournal) -> None:
    plan(journal, [(1, 0, None, "k-0")])
    held, work = runner(journal)
    expire(journal, held)
    (row,) = claim(work)
    assert row.epoch is None
    assert states(journal) == [(1, 0, "claimed", "k-0", None)]
    assert work.gate(row, "k-0", "t-1-0-1", 1) is None
    held.close()


def test_a_halt_committed_while_the_claim_waits_for_the_tasks_row_moves_nothing_to_sent(
        journal: PgJournal, pg_url: str) -> None:
    plan(journal, [(1, 0, None, "k-0"), (1, 1, None, "k-1")])
    held, work = runner(journal)
    got: list[WorkRow] = []
    with psycopg.connect(pg_url) as halting:
        # The halt has updated the task's row and not committed yet: the claim waits on that row,
        # then sees the halt, and hands out nothing.
        halting.execute("UPDATE tasks SET halted = 'step 9 failed' WHERE id = 't'")
        claiming = threading.Thread(target=lambda: got.extend(claim(work)))
        claiming.start()
        wait_for(lambda: bool(query(pg_url, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                            "AND position('FOR SHARE' IN query) > 0")))
        halting.commit()
        claiming.join(timeout=60)
    assert got == []
    assert [s[2] for s in states(journal)] == ["ready", "ready"]
    held.close()


def test_a_call_moved_to_sent_under_other_key_material_is_gated_again_under_a_higher_epoch(
        journal: PgJournal) -> None:
    plan(journal, [(1, 0, None, "planned-0")])
    held, work = runner(journal)
    (row,) = claim(work)
    assert row.epoch is not None
    again = work.gate(row, "mine-0", "t-1-0-2", 1)
    assert again is not None
    assert again > row.epoch
    assert states(journal) == [(1, 0, "sent", "mine-0", "t-1-0-2")]
    # Only under the epoch it was moved with: that one is gone now.
    assert work.gate(row, "other-0", "t-1-0-2", 1) is None
    assert work.gate(replace(row, epoch=again), "other-0", "t-1-0-2", 1) is not None
    held.close()


def test_the_claim_that_gates_holds_the_cap_serialize_on_and_the_fair_share(journal: PgJournal) -> None:
    plan(journal, [(1, i, "x" if i < 2 else None, f"k-{i}") for i in range(8)])
    la, a = runner(journal)
    lb, b = runner(journal)
    # Cap 4 between two runners: 2 each; the second call of serial value x waits for the first.
    assert [(r.idx, r.epoch is not None) for r in claim(a, cap=4)] == [(0, True), (2, True)]
    assert [(r.idx, r.epoch is not None) for r in claim(b, cap=4)] == [(3, True), (4, True)]
    assert claim(a, cap=4) == []
    assert [s[2] for s in states(journal)] == ["sent", "ready", "sent", "sent", "sent", "ready", "ready",
                                               "ready"]
    la.close()
    lb.close()


def keyed_pool(folder: Path, n: int) -> Path:
    data = folder / "rows.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(f'{{"n": {i}}}\n' for i in range(n)))
    return write_pool(folder, ["vars:", "  site: {default: a}", "pool:",
                               "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: '${row.n}'},",
                               "     key: 'op-${site}-${row.n}', for_each: {file: rows.jsonl}}"])


def run(pool: Path, store: Store, url: str, tmp_path: Path, *extra: str) -> None:
    proc = pooler("run", str(pool), "--store", store.url, "--token-file", str(token_file(tmp_path, store)),
                  "--journal", url, "--task", "t", "--out", str(tmp_path / "out"), "--json", *extra)
    assert proc.returncode == 0, proc.stderr


def test_a_sequential_keyed_task_costs_the_journal_one_transaction_a_call(
        store: Store, pg_url: str, tmp_path: Path) -> None:
    calls = 40
    pool = keyed_pool(tmp_path / "pool", calls)
    upgrade(pg_url)
    (before,) = query(pg_url, "SELECT txid_current()")[0]
    run(pool, store, pg_url, tmp_path)
    (after,) = query(pg_url, "SELECT txid_current()")[0]
    # Each call's outcome, the next call's claim and its move to sent commit together; planning,
    # joining, the lease and the task's end take a few more (and the server's autovacuum may).
    # Two a call would be 80 and more.
    assert after - before - 1 < calls * 3 // 2
    rows = query(pg_url, "SELECT key_text, step_id, status, epoch FROM work ORDER BY idx")
    assert [r[:3] for r in rows] == [(f"op-a-{i}", f"t-1-{i}-1", "completed") for i in range(calls)]
    epochs = [r[3] for r in rows]
    assert epochs == sorted(epochs)
    assert len(set(epochs)) == calls


def test_a_sequential_calls_statements_are_planned_once_not_again_for_every_call(journal: PgJournal) -> None:
    calls = 12
    plan(journal, [(1, i, None, f"k{i}") for i in range(calls)])
    lease, work = runner(journal)
    (row,) = claim(work, 1, 1)
    for i in range(1, calls):
        ok, (row,) = work.done_and_claim(Done(row, "completed", {"status": "completed"}, None, None),
                                         limit=1, cap=1, gate_run=RUN)
        assert (ok, row.idx, row.epoch is not None) == (True, i, True)
    # psycopg prepares a statement on its fifth run; the server planned each of them once, for
    # every later run alike, the claim of the next call (its LIMIT a parameter) too.
    prepared = journal.query("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
    assert [text for text, _, custom in prepared if custom] == []
    claims = [generic for text, generic, _ in prepared if "LEFT JOIN" in text and "LIMIT" in text]
    assert claims == [calls - 1 - 4]
    # A generic plan of a big task would cost enough to be compiled on every run.
    assert journal.query("SHOW jit") == [("off",)]
    lease.close()


def test_a_runner_whose_variables_make_other_keys_sends_and_records_its_own(
        store: Store, pg_url: str, tmp_path: Path) -> None:
    pool = keyed_pool(tmp_path / "pool", 3)
    upgrade(pg_url)
    # The task planned by a runner whose site is a, which sent nothing; this runner's site is b.
    with PgJournal(pg_url) as journal:
        join_task(journal, load_pool(pool), RunConfig(out=tmp_path / "planned", task_id="t",
                                                      variables={"site": "a"}))
    assert query(pg_url, "SELECT key_text FROM work ORDER BY idx") == [("op-a-0",), ("op-a-1",), ("op-a-2",)]
    run(pool, store, pg_url, tmp_path, "--var", "site=b")
    assert query(pg_url, "SELECT key_text, state, status, entry->>'key' FROM work ORDER BY idx") == [
        (f"op-b-{i}", "done", "completed", f"op-b-{i}") for i in range(3)]
    assert sorted(op["params"]["n"] for op in store.ops() if op["command"] == "CmdEcho") == [0, 1, 2]
