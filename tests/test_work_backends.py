"""The work-row model of a task behaves the same on either journal: a SQLite file on one host, or
PostgreSQL shared by runners on many (``pooler.journal.work``).  Each test runs on both through the
protocols alone (``TaskJournal``, ``WorkStore``, ``RunnerLease``): claims in file order, references,
serialize_on, the cap and its fair shares, the send gate, calls taken back from runners that are
gone (a lease expired, a process killed), outcomes and their history, a task run again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, environment
from sharedkit import journal_of, wait_for

from pooler.errors import JournalError
from pooler.journal.liveness import host
from pooler.journal.records import PlanCounts
from pooler.journal.sqlite.journal import Journal
from pooler.journal.sqlite.tasks import SqliteTaskJournal
from pooler.journal.work import Done, Planned, RunnerLease, Seat, Settled, TaskJournal, WorkRow, WorkStore

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
#: The run of the task the runners send in (part of each call's step id).
RUN = 1


def open_journal(kind: str, where: str) -> TaskJournal:
    if kind == "sqlite":
        return SqliteTaskJournal(where)
    from pooler.journal.postgres.journal import PgJournal  # noqa: PLC0415

    return PgJournal(where)


class Backend:
    """One journal of the model, and what a test reads of it beside the protocols."""

    def __init__(self, kind: str, where: str, journal: TaskJournal | None = None) -> None:
        self.kind = kind
        self.where = where
        self.journal = journal or open_journal(kind, where)

    def sql(self, text: str, *args: Any) -> list[tuple[Any, ...]]:
        """A statement in SQLite's spelling (``?``), its JSON columns read as values on both."""
        journal: Any = self.journal
        rows = journal.query(text if self.kind == "sqlite" else text.replace("?", "%s"), args)
        return [tuple(_value(v) for v in r) for r in rows]

    def expire(self, lease: RunnerLease) -> None:
        """The lease runs out now (as the journal's clock sees it), and is not renewed."""
        lease._stop.set()  # type: ignore[attr-defined]
        if self.kind == "sqlite":
            self.sql("UPDATE runners SET lease_until = ? WHERE id = ?", time.time() - 1, lease.id)
        else:
            self.sql("UPDATE runners SET lease_until = now() - interval '1 second' WHERE id = ?", lease.id)

    def states(self) -> list[tuple[Any, ...]]:
        return self.sql("SELECT num, idx, state, key_text, step_id FROM work WHERE task = 't' "
                        "ORDER BY num, idx")


def _value(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in "{[":
        return json.loads(v)
    return v


@pytest.fixture(params=JOURNALS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind = request.param
    made = Backend(kind, journal_of(kind, request, tmp_path))
    yield made
    made.journal.close()


def call(num: int, idx: int, deps: tuple[int, ...] = (), serial: str | None = None, key: str | None = None, *,
         planned: bool | None = None, state: str = "ready", kind: str = "call", first: int | None = None,
         last: int | None = None, data: Any = None, task: str = "t") -> tuple[Any, ...]:
    """A work row as the planner gives it: deps as PostgreSQL's array text, data as JSON text."""
    size = len(data) if last is not None and data is not None else 1
    return (task, num, idx, kind, idx if first is None and kind == "call" else first, last, size,
            None if data is None else json.dumps(data), "{" + ",".join(map(str, deps)) + "}", serial, key,
            planned, state)


def plan(backend: Backend, rows: list[tuple[Any, ...]], task: str = "t", doc: dict[str, Any] | None = None
         ) -> None:
    with backend.journal.creating(task, "/pool.yaml", doc or {"steps": []}) as write:
        assert write is not None
        for row in rows:
            write(row)


def never(row: WorkRow, expired: bool) -> Settled | None:
    raise AssertionError(f"no call should be in doubt: {row}")


def blocked(row: WorkRow, dep: int, status: str) -> Settled:
    return Settled("not_run", {"num": row.num, "status": "not_run", "why": f"{dep} {status}"})


def runner(backend: Backend, lease: float = 30, width: int | None = None, task: str = "t"
           ) -> tuple[RunnerLease, WorkStore]:
    held = backend.journal.lease(task, lease, width)
    return held, backend.journal.work(task, held.id)


def claim(work: WorkStore, n: int = 10, cap: int = 100, on_doubt: Any = never) -> list[tuple[int, int]]:
    return [(r.num, r.idx) for r in work.claim(n, cap, on_doubt, blocked)]


def gated(work: WorkStore, n: int = 10, cap: int = 100) -> list[WorkRow]:
    return work.claim(n, cap, never, blocked, tidy=False, gate_run=RUN)


def row_of(num: int, idx: int) -> WorkRow:
    return WorkRow(num, idx, "call", idx, None, 1, None, [], None, 1, None, None, None)


def finish(work: WorkStore, num: int, idx: int, status: str = "completed", **done: Any) -> None:
    row = row_of(num, idx)
    assert work.gate(row, None, f"s{num}-{idx}", 1)
    assert work.done(row, status, {"num": num, "status": status}, None, doubt=None, **done)


def test_claims_hand_calls_out_in_file_order_and_two_runners_never_claim_the_same_one(
        backend: Backend) -> None:
    plan(backend, [call(1, i) for i in range(30)])
    la, a = runner(backend)
    lb, b = runner(backend)
    got_a = claim(a, 7) + claim(a, 7)
    got_b = claim(b, 7) + claim(b, 20)
    assert (len(got_a), len(got_b)) == (14, 16)
    assert not set(got_a) & set(got_b)
    assert got_a == [(1, i) for i in range(14)]
    la.close()
    lb.close()


def test_the_cap_holds_across_runners(backend: Backend) -> None:
    plan(backend, [call(1, i) for i in range(10)])
    la, a = runner(backend)
    assert len(claim(a, 4, cap=5)) == 4
    lb, b = runner(backend)
    # The cap is full: the runner that joined waits, whatever its share.
    assert len(claim(b, 4, cap=5)) == 1
    assert claim(b, 4, cap=5) == []
    finish(a, 1, 0)
    finish(a, 1, 1)
    assert claim(b, 4, cap=5) == [(1, 5)]
    assert claim(b, 4, cap=5) == []
    la.close()
    lb.close()


def test_runners_hold_fair_shares_of_the_cap_each_up_to_its_width(backend: Backend) -> None:
    plan(backend, [call(1, i) for i in range(40)])
    held = [runner(backend, width=width) for width in (None, None, None, 1)]
    # Cap 8 among widths 8, 8, 8 and 1: the narrow one keeps its 1, the others share 7 as 3, 2, 2.
    assert [len(claim(work, 8, cap=8)) for _, work in held] == [3, 2, 2, 1]
    # A runner that holds its share gets no more while the others are alive.
    assert claim(held[0][1], 8, cap=8) == []
    # Alone (the others' leases expired, their calls taken back), a runner takes the whole cap.
    for lease, _ in held[1:]:
        backend.expire(lease)
    assert len(claim(held[0][1], 8, cap=8)) == 5
    for lease, _ in held:
        lease.close()


def test_serialize_on_releases_equal_values_in_file_order(backend: Backend) -> None:
    plan(backend, [call(1, 0, serial="x"), call(1, 1, serial="y"), call(1, 2, serial="x"), call(1, 3),
                   call(1, 4, serial="x")])
    lease, work = runner(backend)
    assert claim(work) == [(1, 0), (1, 1), (1, 3)]
    finish(work, 1, 0)
    assert claim(work) == [(1, 2)]
    finish(work, 1, 2)
    assert claim(work) == [(1, 4)]
    lease.close()


def test_references_wait_for_the_step_on_any_runner_and_are_not_run_after_a_failure(backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1), call(2, 0, (1,)), call(3, 0), call(4, 0, (3,))])
    la, a = runner(backend)
    lb, b = runner(backend)
    # A claim takes the first call of each step that may go before the rest of a step.
    assert claim(a, 2) == [(1, 0), (3, 0)]
    assert claim(b) == [(1, 1)]
    finish(a, 1, 0)
    assert claim(a) == []
    finish(b, 1, 1)
    finish(a, 3, 0, "failed")
    # Step 2 refers to step 1, whose last call was done on the other runner; step 4 to step 3,
    # which failed.
    assert claim(a) == [(2, 0)]
    rows = backend.sql("SELECT status, entry FROM work WHERE task = 't' AND num = 4")
    assert rows == [("not_run", {"num": 4, "status": "not_run", "why": "3 failed"})]
    la.close()
    lb.close()


def test_the_gate_holds_only_under_a_live_lease(backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1)])
    lease, work = runner(backend)
    rows = work.claim(2, 10, never, blocked)
    assert work.gate(rows[0], "k", "s", 1)
    backend.expire(lease)
    assert not work.gate(rows[1], "k2", "s2", 1)
    lease.close()


def test_the_gate_and_the_claim_refuse_once_the_task_halted(backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1), call(1, 2)])
    lease, work = runner(backend)
    rows = work.claim(2, 10, never, blocked)
    assert work.gate(rows[0], None, "s0", 1)
    work.halt("step 1 failed")
    work.halt("step 9 failed")
    assert work.gate(rows[1], None, "s1", 1) is None
    assert claim(work) == []
    # The first halt is the one kept; the call gated before it is still out, the other claimed.
    assert work.open_counts() == (1, 2, "step 1 failed")
    lease.close()


def test_an_expired_runners_calls_are_taken_back(backend: Backend) -> None:
    plan(backend, [call(1, i) for i in range(4)])
    la, a = runner(backend)
    rows = a.claim(3, 10, never, blocked)
    assert a.gate(rows[0], "k0", "t-1-0-1", 1)
    assert a.gate(rows[1], None, "t-1-1-1", 1)
    backend.expire(la)
    lb, b = runner(backend)
    seen: list[tuple[int, str | None]] = []

    def doubt(row: WorkRow, expired: bool) -> Settled | None:
        assert expired, "sent by a runner whose lease expired"
        seen.append((row.idx, row.key_text))
        if row.key_text is not None:
            return None
        return Settled("in_doubt", {"num": 1, "status": "in_doubt"}, doubt="stopped", halt="in doubt")

    got = [(r.idx, r.doubted) for r in b.claim(10, 10, doubt, blocked)]
    # The keyed call sent goes again (same key), naming the call left in doubt; the unkeyed one ends
    # in doubt and halts the task, so nothing more is handed out.
    assert seen == [(0, "k0"), (1, None)]
    assert got == []
    assert backend.sql("SELECT idx, state, status, doubted FROM work WHERE task = 't' ORDER BY idx") == [
        (0, "ready", None, "t-1-0-1"), (1, "done", "in_doubt", None), (2, "ready", None, None),
        (3, "ready", None, None)]
    # The expired runner cannot record any more.
    assert not a.done(rows[2], "completed", {}, None, doubt=None)
    la.close()
    lb.close()


def test_a_call_taken_back_is_sent_under_a_higher_epoch(backend: Backend) -> None:
    plan(backend, [call(1, 0)])
    la, a = runner(backend)
    (row,) = a.claim(1, 10, never, blocked)
    first = a.gate(row, "k", "t-1-0-1", 1)
    assert first is not None
    backend.expire(la)
    lb, b = runner(backend)
    (again,) = b.claim(1, 10, lambda r, expired: None, blocked)
    later = b.gate(again, "k", "t-1-0-1", 1)
    assert later is not None
    assert later > first
    # The runner it was taken from can no longer send it.
    assert a.gate(row, "k", "t-1-0-1", 1) is None
    la.close()
    lb.close()


def test_a_runner_that_left_with_a_call_it_could_not_record_leaves_it_in_doubt(backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1)])
    la, a = runner(backend)
    rows = a.claim(2, 10, never, blocked)
    assert a.gate(rows[0], None, "t-1-0-1", 1)
    # Its lease given up with one call sent and one claimed: both are taken back at once.
    la.close()
    lb, b = runner(backend)
    seen: list[int] = []

    def doubt(row: WorkRow, expired: bool) -> Settled | None:
        assert expired
        seen.append(row.idx)
        return Settled("in_doubt", {"num": 1, "status": "in_doubt"})

    assert claim(b, on_doubt=doubt) == [(1, 1)]
    assert seen == [0]
    lb.close()


def test_a_runner_that_misses_its_lease_knows_it(backend: Backend) -> None:
    plan(backend, [call(1, 0)])
    held = backend.journal.lease("t", 0.6, None)
    assert held.alive()
    backend.sql("DELETE FROM runners WHERE id = ?", held.id)
    # The next heartbeat (a third of the lease) finds the lease gone.
    wait_for(lambda: held.lost is not None, timeout=10)
    assert held.lost == (f"the lease of runner {held.id} expired and its calls were taken back by another "
                         "runner")
    assert not held.alive()
    with pytest.raises(JournalError):
        held.check()
    held.close()


KILLED = textwrap.dedent("""
    import sys
    kind, where = sys.argv[1:3]
    if kind == "sqlite":
        from pooler.journal.sqlite.tasks import SqliteTaskJournal as Opened
    else:
        from pooler.journal.postgres.journal import PgJournal as Opened
    journal = Opened(where)
    lease = journal.lease("t", 600, None)
    work = journal.work("t", lease.id)
    rows = work.claim(2, 10, None, None, tidy=False, gate_run=1)
    print(" ".join(f"{r.idx}:{r.epoch}" for r in rows), flush=True)
    sys.stdin.read()
""")


@pytest.mark.process
def test_a_killed_processs_calls_are_taken_back_by_the_next_runner_at_once(backend: Backend) -> None:
    plan(backend, [call(1, i, key=f"k-{i}", planned=True) for i in range(3)])
    proc = subprocess.Popen([sys.executable, "-c", KILLED, backend.kind, backend.where], cwd=ROOT,
                            env=environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        sent = proc.stdout.readline().split()
        assert [s.split(":")[0] for s in sent] == ["0", "1"]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        # Reaped: a process waited for is gone (a zombie would still answer to its pid).
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()
        assert proc.stdin is not None
        proc.stdin.close()
    assert backend.journal.live_runners("t") == 0
    # Its lease had ten minutes to run: the runner joining now takes its calls back without waiting.
    backend.journal.join("t", "retry")
    lease, work = runner(backend)
    seen: list[tuple[int, bool]] = []

    def doubt(row: WorkRow, expired: bool) -> Settled | None:
        seen.append((row.idx, expired))
        return None

    rows = work.claim(10, 10, doubt, blocked, gate_run=2)
    assert seen == [(0, True), (1, True)]
    assert [(r.idx, r.doubted, r.step_id) for r in rows] == [
        (0, "t-1-0-1", "t-1-0-2"), (1, "t-1-1-1", "t-1-1-2"), (2, None, "t-1-2-2")]
    assert min(r.epoch or 0 for r in rows) > max(int(s.split(":")[1]) for s in sent)
    lease.close()


def test_the_claim_moves_each_call_whose_key_the_plan_holds_to_sent_under_an_epoch_of_its_own(
        backend: Backend) -> None:
    # Step 1 is keyed: its first call's key is planned, its second's is not; step 2 has no key.
    plan(backend, [call(1, 0, key="k-0", planned=True), call(1, 1), call(2, 0, planned=True)])
    lease, work = runner(backend)
    rows = gated(work)
    assert [(r.num, r.idx, r.step_id) for r in rows] == [(1, 0, "t-1-0-1"), (1, 1, None), (2, 0, "t-2-0-1")]
    assert rows[0].epoch is not None
    assert rows[2].epoch is not None
    assert rows[2].epoch > rows[0].epoch
    assert rows[1].epoch is None
    assert backend.states() == [(1, 0, "sent", "k-0", "t-1-0-1"), (1, 1, "claimed", None, None),
                                (2, 0, "sent", None, "t-2-0-1")]
    # The call left claimed goes through the gate of its own.
    assert work.gate(rows[1], "k-1", "t-1-1-1", 1) is not None
    lease.close()


def test_the_claim_moves_nothing_to_sent_once_the_lease_expired(backend: Backend) -> None:
    plan(backend, [call(1, 0, key="k-0", planned=True)])
    lease, work = runner(backend)
    backend.expire(lease)
    (row,) = gated(work)
    assert row.epoch is None
    assert backend.states() == [(1, 0, "claimed", "k-0", None)]
    assert work.gate(row, "k-0", "t-1-0-1", 1) is None
    lease.close()


def test_a_call_moved_to_sent_under_other_key_material_is_gated_again_under_a_higher_epoch(
        backend: Backend) -> None:
    plan(backend, [call(1, 0, key="planned-0", planned=True)])
    lease, work = runner(backend)
    (row,) = gated(work)
    assert row.epoch is not None
    again = work.gate(row, "mine-0", "t-1-0-2", 1)
    assert again is not None
    assert again > row.epoch
    assert backend.states() == [(1, 0, "sent", "mine-0", "t-1-0-2")]
    # Only under the epoch it was moved with: that one is gone now.
    assert work.gate(row, "other-0", "t-1-0-2", 1) is None
    assert work.gate(replace(row, epoch=again), "other-0", "t-1-0-2", 1) is not None
    lease.close()


def test_the_claim_that_gates_holds_the_cap_serialize_on_and_the_fair_share_of_two_runners(
        backend: Backend) -> None:
    plan(backend, [call(1, i, serial="x" if i < 2 else None, key=f"k-{i}", planned=True) for i in range(8)])
    la, a = runner(backend)
    lb, b = runner(backend)
    # Cap 4 between two runners: 2 each; the second call of serial value x waits for the first.
    assert [(r.idx, r.epoch is not None) for r in gated(a, cap=4)] == [(0, True), (2, True)]
    assert [(r.idx, r.epoch is not None) for r in gated(b, cap=4)] == [(3, True), (4, True)]
    assert gated(a, cap=4) == []
    assert [s[2] for s in backend.states()] == ["sent", "ready", "sent", "sent", "sent", "ready", "ready",
                                                "ready"]
    la.close()
    lb.close()


def test_an_outcome_is_recorded_with_the_next_claim_only_by_the_runner_holding_the_call(
        backend: Backend) -> None:
    plan(backend, [call(1, 0, key="k-0", planned=True), call(1, 1, key="k-1", planned=True),
                   call(1, 2, key="k-2", planned=True)])
    la, a = runner(backend)
    (first,) = gated(a, 1)
    landed = {"num": 1, "status": "completed"}
    ok, (second,) = a.done_and_claim(Done(first, "completed", landed, None, None), limit=1, cap=1,
                                     gate_run=RUN)
    assert ok is True
    assert (second.idx, second.step_id) == (1, "t-1-1-1")
    assert second.epoch is not None
    assert second.epoch > (first.epoch or 0)
    assert backend.states() == [(1, 0, "done", None, None), (1, 1, "sent", "k-1", "t-1-1-1"),
                                (1, 2, "ready", "k-2", None)]
    # Taken back once its lease expired and sent again by another runner: the first one's outcome
    # is refused, and the claim that went with it hands it nothing.
    backend.expire(la)
    lb, b = runner(backend)
    (taken,) = b.claim(1, 1, lambda row, expired: None, blocked, gate_run=RUN)
    assert taken.epoch is not None
    assert taken.epoch > second.epoch
    ok, rows = a.done_and_claim(Done(second, "completed", {"num": 1, "status": "completed"}, None, None),
                                limit=1, cap=1, gate_run=RUN)
    assert (ok, rows) == (False, [])
    assert backend.sql("SELECT state, runner, status, doubted FROM work WHERE task = 't' AND idx = 1") == [
        ("sent", lb.id, None, "t-1-1-1")]
    # The call after it is still ready for a runner that holds its lease.
    assert backend.sql("SELECT state, runner FROM work WHERE task = 't' AND idx = 2") == [("ready", None)]
    la.close()
    lb.close()


def test_a_sequential_outcome_claims_the_next_step_once_it_completed_and_the_last_claims_nothing(
        backend: Backend) -> None:
    plan(backend, [call(1, 0), call(2, 0, (1,)), call(3, 0, (2,))])
    lease, work = runner(backend)
    (first,) = work.claim(1, 1, never, blocked)
    entry = {"num": 1, "status": "completed", "detail": {"n": 1}}
    ok, (second,) = work.done_and_claim(Done(first, "completed", entry, {"n": 1}, None), limit=1, cap=1)
    # No key: the next call is claimed, not moved to sent, and has no epoch of its own.
    assert ok is True
    assert (second.num, second.idx, second.epoch) == (2, 0, None)
    assert backend.states() == [(1, 0, "done", None, None), (2, 0, "claimed", None, None),
                                (3, 0, "ready", None, None)]
    # A failure: the step that refers to it is not claimed, and the outcome is still recorded.
    ok, rows = work.done_and_claim(Done(second, "failed", {"num": 2, "status": "failed"}, None, None),
                                   limit=1, cap=1)
    assert (ok, rows) == (True, [])
    assert backend.sql("SELECT num, status FROM calls WHERE task = 't' ORDER BY num") == [
        (1, "completed"), (2, "failed")]
    assert work.details([1]) == {1: {"n": 1}}
    lease.close()


class _Counted:
    """A SQLite connection whose statements are counted, each statement once (a trace callback
    also tells the subprograms a RETURNING runs)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.statements: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self.statements.append(sql.split(maxsplit=1)[0])
        return self.db.execute(sql, *args)

    def cursor(self) -> Any:
        outer, cur = self, self.db.cursor()

        class Cursor:
            def __getattr__(self, name: str) -> Any:
                return getattr(cur, name)

            def __setattr__(self, name: str, value: Any) -> None:
                setattr(cur, name, value)

            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
                outer.statements.append(sql.split(maxsplit=1)[0])
                return cur.execute(sql, *args)

        return Cursor()


def test_a_sequential_call_costs_six_statements_on_sqlite_and_two_round_trips_on_postgresql(
        backend: Backend, tmp_path: Path) -> None:
    plan(backend, [call(1, 0), call(2, 0, (1,)), call(3, 0, (2,), key="k", planned=True)])
    lease, work = runner(backend)
    (first,) = work.claim(1, 1, never, blocked)
    journal: Any = backend.journal
    if backend.kind == "sqlite":
        counted = _Counted(journal.journal._db)
        journal.journal._db = counted
    else:
        from psycopg import pq  # noqa: PLC0415

        # What the client sends, as libpq tells it: each round trip ends with a Sync.
        sent = tmp_path / "frontend.trace"
        trace = sent.open("w")
        journal.pg.conn.pgconn.trace(trace.fileno())
        journal.pg.conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
    ok, (second,) = work.done_and_claim(Done(first, "completed", {"num": 1, "status": "completed"}, None,
                                             None), limit=1, cap=1)
    ok_too, (third,) = work.done_and_claim(Done(second, "completed", {"num": 2, "status": "completed"}, None,
                                                None), limit=1, cap=1, gate_run=RUN)
    assert (ok, ok_too, second.num, third.num, third.epoch is not None) == (True, True, 2, 3, True)
    # The outcome and its history record, what the claim weighs with the next call, the take.
    if backend.kind == "sqlite":
        journal.journal._db = counted.db
        call_cost = ["BEGIN", "UPDATE", "INSERT", "SELECT", "UPDATE", "COMMIT"]
        assert counted.statements == [*call_cost, *call_cost]
    else:
        journal.pg.conn.pgconn.untrace()
        trace.close()
        told = [line.split("\t")[2] for line in sent.read_text().splitlines() if line.startswith("F\t")]
        assert told.count("Sync") + told.count("Query") == 4, told
    assert backend.states()[2] == (3, 0, "sent", "k", "t-3-0-1")
    lease.close()


def test_a_step_over_a_table_gets_its_calls_in_place_of_its_placeholder(backend: Backend) -> None:
    plan(backend, [call(1, 0), call(2, -1, (1,), kind="expand")])
    lease, work = runner(backend)
    assert claim(work) == [(1, 0)]
    assert work.planned(2) == Planned(0, 0, True)
    finish(work, 1, 0, tables={"items": [{"a": 1}, {"a": 2}], "other": [{"b": 1}]}, prefix="p")
    (holder,) = work.claim(10, 100, never, blocked)
    assert (holder.num, holder.idx, holder.kind, holder.deps) == (2, -1, "expand", [1])
    assert work.table(1, None) == (["items", "other"], [])
    assert work.table(1, "items") == (["items", "other"], [{"a": 1}, {"a": 2}])
    assert work.expand(holder, [call(2, i, (1,), data={"a": i + 1}) for i in range(2)])
    assert not work.expand(holder, [call(2, 9, (1,))])
    assert work.planned(2) == Planned(2, 2, False)
    assert [(r.num, r.idx, r.data) for r in work.claim(10, 100, never, blocked)] == [
        (2, 0, {"a": 1}), (2, 1, {"a": 2})]
    assert backend.journal.table_rows("t") == [(1, 0, "items", "p", None, [{"a": 1}, {"a": 2}]),
                                               (1, 0, "other", "p", None, [{"b": 1}])]
    lease.close()


def test_references_read_the_detail_of_each_steps_last_completed_call(backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1), call(1, 2), call(2, 0)])
    lease, work = runner(backend)
    rows = work.claim(10, 100, never, blocked)
    for row, status in zip(rows, ("completed", "completed", "failed", "completed"), strict=True):
        assert work.gate(row, None, f"s{row.idx}", 1)
        assert work.done(row, status, {"status": status}, {"id": row.num * 10 + row.idx}, doubt=None)
    assert work.details([1, 2, 3]) == {1: {"id": 11}, 2: {"id": 20}}
    lease.close()


def test_open_counts_tell_the_calls_ready_and_held_by_anyone_but_those_beyond_the_sample(
        backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1), call(1, 2), call(1, 3, state="beyond")])
    la, a = runner(backend)
    lb, b = runner(backend)
    assert claim(a, 1) == [(1, 0)]
    assert claim(b, 1) == [(1, 1)]
    finish(b, 1, 1)
    assert a.open_counts() == (1, 1, None)
    la.close()
    lb.close()


def test_a_task_joined_while_a_live_runner_holds_it_resets_nothing_and_one_joined_after_starts_a_new_run(
        backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1), call(2, 0, (1,)), call(3, 0, key="k-3")])
    lease, work = runner(backend)
    assert claim(work) == [(1, 0), (1, 1), (3, 0)]
    finish(work, 1, 0)
    finish(work, 1, 1, "failed")
    row = row_of(3, 0)
    assert work.gate(row, "k-3", "s3-0", 1)
    assert work.done(row, "in_doubt", {"num": 3, "status": "in_doubt", "key": "k-3", "step_id": "s3-0"}, None,
                     doubt="left")
    assert claim(work) == []
    state = "SELECT num, idx, state, status, round FROM work WHERE task = 't' ORDER BY num, idx"
    before = backend.sql(state)
    assert before == [(1, 0, "done", "completed", 1), (1, 1, "done", "failed", 1),
                      (2, 0, "done", "not_run", 1), (3, 0, "done", "in_doubt", 1)]
    # The runner still holds the task: a runner joining now joins its run as it is.
    assert backend.journal.join("t", "retry") is False
    assert backend.sql(state) == before
    lease.close()
    # No live runner: a new run, the failed call under its next key round, the one it held back
    # ready, the one that completed without a key ready too (nothing tells it from a new one), and
    # the one in doubt left to the rule of the runner that tidies first.
    assert backend.journal.join("t", "skip") is True
    assert backend.sql(state) == [(1, 0, "ready", None, 1), (1, 1, "ready", None, 2),
                                  (2, 0, "ready", None, 1), (3, 0, "doubt", "in_doubt", 1)]
    assert backend.sql("SELECT runs, again, halted FROM tasks WHERE id = 't'") == [(3, 3, None)]
    assert (backend.journal.shared("t") or {})["in_doubt"] == "skip"
    assert backend.journal.run_of("t") == 3
    lease, work = runner(backend)
    seen: list[tuple[int, bool]] = []

    def doubt(row: WorkRow, expired: bool) -> Settled | None:
        seen.append((row.num, expired))
        return Settled("skipped", {"num": 3, "status": "skipped"}, doubt="skipped")

    assert claim(work, on_doubt=doubt) == [(1, 0), (1, 1)]
    assert seen == [(3, False)]
    lease.close()


def test_plan_counts_count_calls_by_status_those_sent_without_an_answer_in_doubt(backend: Backend) -> None:
    assert backend.journal.plan_counts("t") is None
    plan(backend, [call(1, 0, first=0, last=2, data=[{}, {}, {}]), call(1, 1, first=3, last=4, data=[{}, {}]),
                   call(2, 0), call(3, 0), call(4, 0, (3,)), call(5, 0, state="beyond"),
                   call(6, -1, (3,), kind="expand")])
    lease, work = runner(backend)
    assert claim(work) == [(1, 0), (1, 1), (2, 0), (3, 0)]
    finish(work, 1, 0)
    assert work.gate(row_of(1, 1), None, "s", 1)
    finish(work, 2, 0, "skipped")
    finish(work, 3, 0, "failed")
    assert claim(work) == []
    # A chunk of 3 rows is one call, as the run counts it; the step over step 3's table, which
    # failed, is one call not run.
    assert backend.journal.plan_counts("t") == PlanCounts(planned=7, completed=1, failed=1, in_doubt=1,
                                                          skipped=1, not_run=3)
    assert backend.journal.planned_calls("t") == 6
    lease.close()


def test_each_outcome_joins_the_history_the_report_reads_in_the_run_the_task_is_in(backend: Backend) -> None:
    plan(backend, [call(1, 0, key="k-0", planned=True), call(1, 1, key="k-1", planned=True), call(2, 0, (1,)),
                   call(3, 0)])
    backend.journal.join("t", "retry")
    lease, work = runner(backend)
    first, _, third = gated(work)
    entry = {"num": 1, "status": "failed", "key": "k-0", "step_id": "t-1-0-1", "message": "refused",
             "detail": {"id": 7}, "result": False}
    assert work.done(first, "failed", entry, {"id": 7}, doubt=None)
    assert work.done(third, "completed", {"num": 3, "status": "completed"}, None, doubt=None)
    claim(work)
    records = sorted(backend.journal.history().call_records("t"), key=lambda r: (r.num, r.row or 0))
    assert [(r.run, r.num, r.row, r.key, r.step_id, r.status, r.in_doubt) for r in records] == [
        (2, 1, 0, "k-0", "t-1-0-1", "failed", False), (2, 1, 1, "k-1", "t-1-1-1", "sent", False),
        (2, 2, 0, None, None, "not_run", False), (2, 3, 0, None, None, "completed", False)]
    done = records[0]
    assert done.sent_ms is not None
    assert done.done_ms is not None
    assert done.sent_ms <= done.done_ms
    # A call never sent has no sending time; one sent and not recorded no answer yet.
    assert (records[2].sent_ms, records[2].done_ms is not None) == (None, True)
    assert (records[1].sent_ms is not None, records[1].done_ms) == (True, None)
    # The entries as the report reads them (a SQLite journal keeps an entry's detail beside it).
    entries = {rid: {k: v for k, v in e.items() if k != "detail"}
               for rid, e in backend.journal.history().entries("t", [done.id, records[2].id])}
    assert entries == {done.id: {k: v for k, v in entry.items() if k != "detail"},
                       records[2].id: {"num": 2, "status": "not_run", "why": "1 failed"}}
    lease.close()


def test_the_facts_of_a_run_are_kept_by_its_first_runner(backend: Backend) -> None:
    plan(backend, [call(1, 0)])
    backend.journal.join("t", "retry")
    facts = {"store": "http://store", "mode": "parallel", "width": 4, "serialize_on": None,
             "steps": [{"num": 1, "name": "a"}], "again": ["--task", "t"]}
    backend.journal.record_run("t", facts)
    backend.journal.record_run("t", {**facts, "width": 9})
    [(run, kept)] = list(backend.journal.history().run_facts("t").items())
    assert run == 2
    assert (kept.store, kept.mode, kept.width, kept.steps, kept.again) == (
        "http://store", "parallel", 4, [{"num": 1, "name": "a"}], ["--task", "t"])


def test_a_task_is_created_once_with_its_plan_and_a_plan_that_fails_leaves_nothing(backend: Backend) -> None:
    def broken() -> None:
        with backend.journal.creating("t", "/pool.yaml", {}) as write:
            assert write is not None
            write(call(1, 0))
            raise ValueError("a row broke")

    with pytest.raises(ValueError, match="a row broke"):
        broken()
    assert backend.journal.shared("t") is None
    assert backend.journal.planned("t") == {}
    doc: dict[str, Any] = {"steps": [], "sample": None}
    with backend.journal.creating("t", "/pool.yaml", doc) as write:
        assert write is not None
        write(call(1, 0))
        # What the plan found is kept with the task as the block leaves it.
        doc["files"] = [{"num": 0}]
    with backend.journal.creating("t", "/pool.yaml", {"other": True}) as write:
        assert write is None
    assert backend.journal.shared("t") == {"steps": [], "sample": None, "files": [{"num": 0}]}
    assert backend.journal.planned("t") == {1: Planned(1, 1, False)}
    assert backend.journal.answer_state("t") == (backend.journal.shared("t"), "running", True)
    task = backend.journal.task("t")
    assert task is not None
    assert (task.id, task.pool_file, task.status, task.runs) == ("t", "/pool.yaml", "running", 1)
    assert backend.journal.last_unfinished("/pool.yaml") == "t"


def test_a_new_task_of_a_key_scope_skips_the_calls_whose_key_another_task_of_it_landed(
        backend: Backend) -> None:
    plan(backend, [call(1, 0, key="k-1", task="a"), call(1, 1, key="k-2", task="a")], task="a",
         doc={"key_scope": "s"})
    lease, work = runner(backend, task="a")
    rows = work.claim(10, 100, never, blocked)
    assert work.gate(rows[0], "k-1", "a-1-0-1", 1)
    landed = {"num": 1, "status": "completed", "key": "k-1", "step_id": "a-1-0-1"}
    assert work.done(rows[0], "completed", landed, {"id": 1}, doubt=None)
    lease.close()
    plan(backend, [call(1, 0, key="k-1", task="b"), call(1, 1, key="k-2", task="b")], task="b",
         doc={"key_scope": "s"})
    rows = [(r.num, r.idx, r.kind, r.size, r.state, r.status, r.entry, r.step_id, r.detail)
            for r in backend.journal.answer_rows("b")]
    assert rows == [(1, 0, "call", 1, "done", "skipped", {"num": 1, "status": "skipped", "key": "k-1",
                                                          "step_id": "a-1-0-1"}, "a-1-0-1", {"id": 1}),
                    (1, 1, "call", 1, "ready", None, None, None, None)]


def split(at: int, num: int, *, idx: int, next_idx: int, first: int, data: list[Any]
          ) -> list[tuple[Any, ...]]:
    head, tail = data[:at - first], data[at - first:]
    return [call(num, idx, first=first, last=at - 1, data=head),
            call(num, next_idx, first=at, last=at + len(tail) - 1, data=tail, state="beyond")]


def test_a_sampled_plan_is_widened_from_the_calls_it_planned_beyond_the_sample(backend: Backend) -> None:
    plan(backend, [call(1, 0, first=0, last=1, data=[{"r": 0}, {"r": 1}]),
                   call(1, 1, first=2, last=3, data=[{"r": 2}, {"r": 3}], state="beyond"),
                   call(1, 2, first=4, last=5, data=[{"r": 4}, {"r": 5}], state="beyond")], doc={"sample": 2})
    assert not backend.journal.release("t", 2, split)
    assert backend.journal.release("t", 3, split)
    assert backend.sql("SELECT idx, row_first, row_last, size, state, data FROM work WHERE task = 't' "
                       "ORDER BY idx") == [
        (0, 0, 1, 2, "ready", [{"r": 0}, {"r": 1}]), (1, 2, 2, 1, "ready", [{"r": 2}]),
        (2, 3, 3, 1, "beyond", [{"r": 3}]), (3, 4, 5, 2, "beyond", [{"r": 4}, {"r": 5}])]
    assert backend.journal.release("t", None, split)
    assert (backend.journal.shared("t") or {}).get("sample", "gone") is None
    assert [r.state for r in backend.journal.answer_rows("t")] == ["ready"] * 4
    with backend.journal.widening("t", None) as widening:
        assert widening is None


def test_replan_is_refused_while_a_runner_holds_the_task_and_rewrites_the_plan_once_none_does(
        backend: Backend) -> None:
    plan(backend, [call(1, 0, key="k-0", data={"n": 0}), call(1, 1, key="k-1", data={"n": 1})],
         doc={"files": [], "steps": []})
    lease, _ = runner(backend)
    with pytest.raises(JournalError, match=r"^--replan refused for task t: runners still hold it - run it "
                                           r"with --replan once they have ended\.$"), \
            backend.journal.replanning("t"):
        pytest.fail("refused before the block")
    lease.close()
    with backend.journal.replanning("t") as replanning:
        assert replanning.step_calls(1) == [(0, "ready", None, "k-0", {"n": 0}, 1),
                                            (1, "ready", None, "k-1", {"n": 1}, 1)]
        replanning.drop_calls(1, [1])
        replanning.write([call(1, 2, key="k-2", data={"n": 2})])
        replanning.set_round(3, 1, 2)
        replanning.update_doc({"files": [{"num": 1}]})
    assert backend.sql("SELECT idx, key_text, round FROM work WHERE task = 't' ORDER BY idx") == [
        (0, "k-0", 1), (2, "k-2", 3)]
    assert backend.journal.shared("t") == {"files": [{"num": 1}], "steps": []}


def test_a_task_made_by_an_earlier_version_on_sqlite_can_be_shown_not_run_again(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    Journal(path).close()
    with sqlite3.connect(path) as db:
        # A task as an earlier pooler made it: its row, and no plan.
        db.execute("INSERT INTO tasks (id, pool_file, started) "
                   "VALUES ('old', '/pool.yaml', '2026-11-30T00:00:00')")
    with SqliteTaskJournal(path) as journal:
        assert journal.shared("nothing") is None
        with pytest.raises(JournalError) as refused:
            journal.shared("old")
        assert refused.value.message == (
            f"the task old in {path} was planned by an earlier version of pooler, before tasks kept their "
            "plan as work rows - it can be shown, not run again: start a new task.")
        task = journal.task("old")
        assert task is not None
        assert (task.id, task.status) == ("old", "running")


def test_a_journal_in_memory_keeps_leases_alive_on_its_one_connection() -> None:
    journal = SqliteTaskJournal(":memory:")
    backend = Backend("sqlite", ":memory:", journal)
    plan(backend, [call(1, 0)])
    lease, work = runner(backend, lease=0.6)
    (until,) = backend.sql("SELECT lease_until FROM runners WHERE id = ?", lease.id)[0]
    # Renewed every third of the lease, through the journal's own connection.
    wait_for(lambda: backend.sql("SELECT lease_until FROM runners WHERE id = ?", lease.id)[0][0] > until,
             timeout=10)
    assert lease.alive()
    assert claim(work) == [(1, 0)]
    lease.close()
    assert backend.sql("SELECT count(*) FROM runners") == [(0,)]
    journal.close()


def test_outcomes_recorded_together_are_each_recorded_only_by_the_runner_holding_the_call(
        backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1), call(1, 2)])
    la, a = runner(backend)
    lb, b = runner(backend)
    assert claim(a, 2) == [(1, 0), (1, 1)]
    assert claim(b, 1) == [(1, 2)]
    for work, idx in ((a, 0), (a, 1), (b, 2)):
        assert work.gate(row_of(1, idx), None, f"s1-{idx}", 1)
    # Runner a records its two calls and, by mistake, runner b's: that one is refused alone.
    outcomes = [Done(row_of(1, idx), "completed", {"num": 1, "status": "completed"}, {"n": idx}, None)
                for idx in (0, 1, 2)]
    assert a.done_all(outcomes) == [True, True, False]
    assert backend.sql("SELECT idx, state, status FROM work WHERE task = 't' ORDER BY idx") == [
        (0, "done", "completed"), (1, "done", "completed"), (2, "sent", None)]
    assert b.done_all(outcomes[2:]) == [True]
    la.close()
    lb.close()


def test_outcomes_recorded_with_a_claim_claim_only_once_every_one_was_recorded(backend: Backend) -> None:
    plan(backend, [call(1, idx) for idx in range(5)])
    la, a = runner(backend)
    lb, b = runner(backend)
    assert claim(a, 2, cap=4) == [(1, 0), (1, 1)]
    assert claim(b, 1, cap=4) == [(1, 2)]

    def done(idx: int) -> Done:
        return Done(row_of(1, idx), "completed", {"num": 1, "status": "completed"}, {"n": idx}, None)

    # Two outcomes that came back together, as the runner records them: those before the last on
    # their own, the last with the next call's claim.
    before = a.done_all([done(0)])
    last, rows = a.done_and_claim(done(1), limit=1, cap=4)
    assert ([*before, last], [(r.num, r.idx) for r in rows]) == ([True, True], [(1, 3)])
    # Runner b's call among them is refused alone, and nothing more is claimed.
    before = a.done_all([done(3)])
    last, rows = a.done_and_claim(done(2), limit=1, cap=4)
    assert ([*before, last], rows) == ([True, False], [])
    assert backend.sql("SELECT idx, state, status FROM work WHERE task = 't' ORDER BY idx") == [
        (0, "done", "completed"), (1, "done", "completed"), (2, "claimed", None), (3, "done", "completed"),
        (4, "ready", None)]
    assert backend.sql("SELECT count(*) FROM calls WHERE task = 't'") == [(3,)]
    la.close()
    lb.close()


def test_an_outcome_refused_because_another_runner_holds_the_call_joins_no_history(backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1)])
    la, a = runner(backend)
    lb, b = runner(backend)
    assert claim(a, 1) == [(1, 0)]
    assert claim(b, 1) == [(1, 1)]
    assert a.gate(row_of(1, 0), None, "s1-0", 1)
    assert b.gate(row_of(1, 1), None, "s1-1", 1)
    # The outcome and its history record are one write: a refused outcome leaves no record.
    assert not a.done(row_of(1, 1), "completed", {"num": 1, "status": "completed", "step_id": "s1-1"}, None,
                      doubt=None)
    assert backend.sql("SELECT count(*) FROM calls WHERE task = 't'") == [(0,)]
    assert a.done(row_of(1, 0), "completed", {"num": 1, "status": "completed", "step_id": "s1-0"}, None,
                  doubt=None)
    assert b.done(row_of(1, 1), "failed", {"num": 1, "status": "failed", "step_id": "s1-1"}, None, doubt=None)
    assert backend.sql("SELECT row, status, step_id FROM calls WHERE task = 't' ORDER BY row") == [
        (0, "completed", "s1-0"), (1, "failed", "s1-1")]
    la.close()
    lb.close()


def test_a_transaction_that_raises_after_its_lock_and_first_write_leaves_nothing_and_the_journal_goes_on(
        backend: Backend) -> None:
    plan(backend, [call(1, 0)])
    db = backend.journal.db

    def halt_then_fail() -> None:
        with db.transaction() as tx:
            tx.lock("t")
            assert tx.execute("halt_task", {"task": "t", "reason": "a test"}) == 1
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        halt_then_fail()
    assert backend.sql("SELECT halted FROM tasks WHERE id = 't'") == [(None,)]
    # A transaction that writes nothing commits nothing, and the next one runs as the first did.
    with db.transaction() as tx:
        tx.lock("t")
    lease, work = runner(backend)
    assert claim(work) == [(1, 0)]
    lease.close()


def test_the_statement_that_ends_a_transaction_commits_with_it_but_not_inside_a_wider_one(
        backend: Backend) -> None:
    plan(backend, [call(1, 0)])
    db = backend.journal.db

    def halt_inside_a_wider_transaction_that_fails() -> None:
        with db.transaction() as outer:
            with outer.transaction() as inner:
                inner.lock("t")
                assert inner.finish("halt_task", {"task": "t", "reason": "inner"}) == []
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        halt_inside_a_wider_transaction_that_fails()
    other = open_journal(backend.kind, backend.where)
    try:
        assert other.task("t") is not None
        assert Backend(backend.kind, backend.where, other).sql("SELECT halted FROM tasks WHERE id = 't'") == [
            (None,)]
        with db.transaction() as tx:
            tx.lock("t")
            tx.finish("halt_task", {"task": "t", "reason": "ended"})
        # Seen by another connection: committed.
        assert Backend(backend.kind, backend.where, other).sql("SELECT halted FROM tasks WHERE id = 't'") == [
            ("ended",)]
    finally:
        other.close()


def test_a_runner_that_joins_right_after_another_takes_part_in_its_run_before_it_sends_anything(
        backend: Backend) -> None:
    plan(backend, [call(1, 0), call(1, 1, key="k-1")])
    lease, work = runner(backend)
    assert claim(work) == [(1, 0), (1, 1)]
    finish(work, 1, 0, "failed")
    finish(work, 1, 1, "failed")
    lease.close()
    # The first runner's lease is taken in the transaction that begins the run again: the one
    # joining next finds it there, though the first has not claimed or sent a call yet.
    first, second = Seat.new(30, None), Seat.new(30, None)
    assert backend.journal.join("t", "stop", seat=first) is True
    assert backend.journal.join("t", "stop", seat=second) is False
    assert backend.sql("SELECT num, idx, state, round FROM work WHERE task = 't' ORDER BY idx") == [
        (1, 0, "ready", 2), (1, 1, "ready", 2)]
    assert backend.sql("SELECT again FROM tasks WHERE id = 't'") == [(2,)]
    assert backend.journal.live_runners("t") == 2
    for seat in (first, second):
        backend.journal.lease("t", seat.seconds, seat.width, seat).close()
    assert backend.journal.live_runners("t") == 0


def test_the_runner_that_plans_a_task_holds_its_lease_as_the_plan_is_committed(backend: Backend) -> None:
    seat = Seat.new(30, 4)
    with backend.journal.creating("t", "/pool.yaml", {"steps": []}, seat) as write:
        assert write is not None
        write(call(1, 0))
    assert seat.taken is not None
    assert backend.sql("SELECT width FROM runners WHERE id = ?", seat.id) == [(4,)]
    # A runner joining as the planner starts its run takes part in that run: no run again.
    assert backend.journal.join("t", "stop", seat=Seat.new(30, None)) is False
    assert backend.sql("SELECT again FROM tasks WHERE id = 't'") == [(1,)]


def test_a_run_again_keeps_what_its_command_says_in_the_tasks_document_in_the_transaction_that_begins_it(
        backend: Backend) -> None:
    plan(backend, [call(1, 0)], doc={"steps": [], "options": {"stop_on_error": True}})
    assert backend.journal.join("t", "retry", again={"options": {"stop_on_error": False}}) is True
    assert (backend.journal.shared("t") or {})["options"] == {"stop_on_error": False}
    lease, _ = runner(backend)
    # Joined while a runner holds the task: the run it is in keeps its document.
    assert backend.journal.join("t", "retry", again={"options": {"stop_on_error": True}}) is False
    assert (backend.journal.shared("t") or {})["options"] == {"stop_on_error": False}
    lease.close()


def test_a_rate_bucket_is_one_for_every_runner_of_the_task_and_one_a_name(backend: Backend) -> None:
    plan(backend, [call(1, 0)])
    (la, a), (lb, b) = runner(backend), runner(backend)
    interval, tolerance = 1 / 20, 4 / 20
    # Reserved in turn by two runners: a burst of 5, then one slot each twentieth of a second.
    slots, first = [], time.time()
    for i in range(10):
        asked = time.time()
        slots.append((asked, asked + (a if i % 2 else b).pace("pool", interval, tolerance)))
    # Each slot is the bucket's next one, or now where the bucket has room: a slow journal's
    # statements use the room up, not the slots after it.
    for i, (asked, slot) in enumerate(slots):
        assert slot == pytest.approx(max(asked, first + (i - 4) * interval), abs=0.04), slots
    # Another bucket's slots are its own.
    assert a.pace("step 2 warehouse=W1", interval, 0.0) == pytest.approx(0.0, abs=0.04)
    la.close()
    lb.close()


def test_a_runner_of_this_machine_whose_process_is_gone_is_dead_before_its_lease_ends_on_either_journal(
        backend: Backend) -> None:
    plan(backend, [call(1, 0)])
    lease = backend.journal.lease("t", 60, None)
    # Both journals name the runner's machine alike: the host since its boot, and the process.
    assert backend.sql("SELECT host, pid FROM runners WHERE id = ?", lease.id) == [(host(), os.getpid())]
    assert backend.journal.live_runners("t") == 1
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    backend.sql("UPDATE runners SET pid = ? WHERE id = ?", gone.pid, lease.id)
    assert backend.journal.live_runners("t") == 0
    # The same process on a machine by another name (or this one before a boot) is left to its lease.
    backend.sql("UPDATE runners SET host = ? WHERE id = ?", "elsewhere", lease.id)
    assert backend.journal.live_runners("t") == 1
    lease.close()
