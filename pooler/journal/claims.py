"""The work of a task as one runner sees it (``pooler.journal.work.WorkStore``), written once over
the backend's connector: its calls as rows of ``work``, claimed in small batches in file order
under the task's lock (so the count of calls claimed or in flight across every runner is exact
when it is weighed against ``max_concurrency``), moved to ``sent`` only under a live lease,
recorded done only by the runner that still holds them (each outcome joining the history in
``calls``), and taken back from runners that are gone.

A claim is a few statements in one transaction: the task's lock (an advisory lock on PostgreSQL;
a SQLite write transaction holds the file), what it weighs (``claim_state``), the calls that may
go (``claimable_heads``, then ``claimable``; read with ``claim_state`` in one statement,
``claim_next``, when one call goes at a time), and one statement that takes them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from pooler.journal.connector import Connector, Row
from pooler.journal.documents import Entry, as_entry
from pooler.journal.lease import Runner, gone_runners, runners
from pooler.journal.records import join_entry
from pooler.journal.work import BUSY, BlockedPolicy, Done, DoubtPolicy, Planned, Settled, WorkRow
from pooler.pool.budget import Counts, Judge, counts_of

#: How many steps past the first with ready calls a claim looks for a step that may go: a claim
#: costs a seek a step it looks at, so a window keeps it the same for a pool of 2,000 steps.
HEADS_WINDOW = 32


def work_row(db: Connector, r: Row, epoch: int | None = None) -> WorkRow:
    """A work row from a query that gives ``WorkRow``'s columns by name, its JSON read."""
    return WorkRow(int(r["num"]), int(r["idx"]), r["kind"], r["row_first"], r["row_last"], int(r["size"]),
                   db.json_out(r["data"]), list(db.json_out(r["deps"]) or ()), r["serial"], int(r["round"]),
                   r["doubted"], r["key_text"], r["step_id"], epoch)


def planned_steps(rows: Iterable[Row]) -> dict[int, Planned]:
    """What a plan holds of each step, from the rows of ``planned_steps``."""
    return {int(r["num"]): Planned(int(r["held"]), int(r["next_idx"]), bool(r["placeholder"])) for r in rows}


def budget_counts(db: Connector, task: str) -> dict[int, Counts]:
    """What the task's error budgets count, by step (``pool/budget.py``)."""
    return counts_of((r["num"], r["planned"], r["failed"], r["in_doubt"])
                     for r in db.all("budget_counts", {"task": task}))


def fair_share(live: list[Runner], runner: str, cap: int) -> int:
    """A runner's fair share of the task's cap: the cap divided among the live runners as water
    fills vessels, each up to its width: a runner narrower than an equal part keeps its width, the
    others split what is left in equal parts, one more for each of the first to join while a
    remainder lasts."""
    widths = [(r.id, min(cap if r.width is None else r.width, cap), r.started) for r in live]
    left, n = cap, len(widths)
    wide: int | None = None
    for rid, width, _ in sorted(widths, key=lambda r: r[1]):
        if width * n > left:
            wide = width
            break
        if rid == runner:
            return width
        left -= width
        n -= 1
    if wide is None:
        return cap
    me = next((r for r in widths if r[0] == runner), None)
    rank = 0 if me is None else sum(1 for rid, width, started in widths
                                    if width >= wide and (started, rid) < (me[2], me[0]))
    return left // n + (1 if rank < left % n else 0)


def _ms(now: float) -> int:
    return int(now * 1000)


class Work:
    """The work of ``task`` in the journal ``db`` as the runner ``runner`` (its lease's id) sees it."""

    def __init__(self, db: Connector, task: str, runner: str) -> None:
        self.db = db
        self.task = task
        self.runner = runner
        self._call = {"task": task, "runner": runner}
        #: Whether every step of the task is one call (asked once: see ``_one_call_a_step``).
        self._one_call: bool | None = None

    def _at(self, row: WorkRow) -> dict[str, Any]:
        return {"task": self.task, "runner": self.runner, "num": row.num, "idx": row.idx}

    def claim(self, limit: int, cap: int, on_doubt: DoubtPolicy, on_blocked: BlockedPolicy, *,
              tidy: bool = True, gate_run: int | None = None) -> list[WorkRow]:
        """Up to ``limit`` calls this runner may send, within the task-wide ``cap``, in file order;
        with ``gate_run`` (the run of the task this runner sends in, part of each call's step id),
        those whose key the plan holds already moved to sent, as ``gate`` does.  With ``tidy``,
        first take back the calls of runners that are gone and end the calls whose step cannot
        run, in the same transaction."""
        with self.db.transaction() as db:
            db.lock(self.task)
            if tidy:
                self._reclaim(db, on_doubt)
                # A halted task lists no call after its halt: what did not run is only counted.
                found = db.one("task_halted", self._call)
                if found is not None and found["halted"] is None:
                    self._settle_blocked(db, on_blocked)
            return self._claim(db, limit, cap, gate_run)[1]

    def _claim(self, db: Connector, limit: int, cap: int, run: int | None, *,
               before: Sequence[tuple[str, dict[str, Any]]] = ()) -> tuple[list[bool], list[WorkRow]]:
        """The calls claimed; with ``before`` (statements that each give a row when they did their
        work), those statements first, with the claim's reads (one round trip on PostgreSQL):
        whether each gave a row, and nothing claimed unless every one did."""
        now = time.time()
        weigh = {**self._call, "now": now}
        first: list[Row] | None = None
        if cap == 1 or self._one_call_a_step(db):
            # One call at a time, or steps of one call each, go in file order: the first calls
            # that may go are read with what the claim weighs (one statement, not two), and taken
            # only as the weighing lets them.
            *done, found = db.batch([*before, ("claim_next", {**weigh, "take": min(limit, cap)})])
            state = found[0] if found else None
            first = [r for r in found if r["num"] is not None]
        else:
            done = [db.all(*statement) for statement in before]
            state = db.one("claim_state", weigh)
        recorded = [bool(rows) for rows in done]
        if not all(recorded) or state is None or not state["there"] or state["halted"] is not None:
            return recorded, []
        busy = int(state["busy"])
        if cap - busy <= 0:
            return recorded, []
        if int(state["runners"]) > 1:
            # Held to its share only while the cap is shared: a runner alone takes the whole cap.
            live = [r for r in runners(db, self.task) if r.id == self.runner or r.alive]
            limit = min(limit, fair_share(live, self.runner, cap) - int(state["mine"]))
            if limit <= 0:
                return recorded, []
        take = min(limit, cap - busy)
        # The first call of each step that may go (fewest in flight first), then the rest in file
        # order; read already in file order when no step has more than one call to weigh.
        if first is not None:
            heads = first[:take]
        else:
            heads = db.all("claimable_heads",
                           {"task": self.task, "take": take, "window": take + HEADS_WINDOW})
            if len(heads) < take:
                held = {(r["num"], r["idx"]) for r in heads}
                rest = [r for r in db.all("claimable", {"task": self.task, "take": take + len(heads)})
                        if (r["num"], r["idx"]) not in held]
                heads = [*heads, *rest[:take - len(heads)]]
        if not heads:
            return recorded, []
        gate = run is not None and bool(state["leased"])
        epoch = int(state["epoch"] or 0)
        rows: list[WorkRow] = []
        calls: list[dict[str, Any]] = []
        for r in sorted(heads, key=lambda r: (r["num"], r["idx"])):
            row = work_row(db, r)
            sent = gate and row.kind == "call" and bool(r["key_planned"])
            if sent:
                epoch += 1
                rows_of = "" if row.row_first is None else f"-{row.row_first}"
                row.step_id = f"{self.task}-{row.num}{rows_of}-{run}"
            calls.append({"num": row.num, "idx": row.idx, "sent": sent,
                          "step_id": row.step_id if sent else None, "epoch": epoch if sent else None})
            rows.append(row)
        took = {**self._call, "now_ms": _ms(now)}
        # One call (a sequential claim) by its key alone: no list to encode and join with.
        took_rows = (db.finish("take_call", {**took, **calls[0]}) if len(calls) == 1
                     else db.finish("take_calls", {**took, "calls": db.json_in(calls)}))
        taken = {(int(r["num"]), int(r["idx"])): r["epoch"] for r in took_rows}
        for row, call in zip(rows, calls, strict=True):
            if call["sent"]:
                row.epoch = int(taken[(row.num, row.idx)])
        return recorded, rows

    def _one_call_a_step(self, db: Connector) -> bool:
        """Whether every step of the task is one call, none planned as it runs: then the first
        calls that may go in file order are each its step's first, and a claim takes them without
        weighing the steps (``claimable_heads``).  A plan's steps never gain calls but by a row
        planned as it runs (``expand``), so it is asked once."""
        if self._one_call is None:
            found = db.one("one_call_a_step", {"task": self.task})
            self._one_call = found is not None and bool(found["one"])
        return self._one_call

    def _reclaim(self, db: Connector, on_doubt: DoubtPolicy) -> None:
        """The calls of runners that are gone: unsent ones back to ready, sent ones ruled in doubt;
        and the calls an earlier run recorded in doubt, which a run again leaves to this rule too."""
        gone = gone_runners(db, self.task)
        ids = db.json_in(gone)
        if gone:
            db.execute("unclaim_gone", {"task": self.task, "runners": ids})
        found = db.all("in_doubt_to_rule", {"task": self.task, "runners": ids, "now_ms": _ms(time.time())})
        for r in sorted(found, key=lambda r: (r["num"], r["idx"])):
            row = replace(work_row(db, r), sent_age=None if r["age"] is None else float(r["age"]))
            decided = on_doubt(row, bool(r["expired"]))
            if decided is None:
                # A call without a key goes out as a new one: it repeats nothing the store can tell.
                doubted = row.step_id if row.key_text is not None else None
                db.execute("send_again", {**self._at(row), "doubted": doubted})
            else:
                self._end(db, row, decided)
        if gone:
            db.execute("forget_runners", {"runners": ids})

    def _settle_blocked(self, db: Connector, on_blocked: BlockedPolicy) -> None:
        """Ready calls of a step that refers to one that did not complete: not run."""
        for r in db.all("blocked", {"task": self.task}):
            row = work_row(db, r)
            self._end(db, row, on_blocked(row, int(r["blocked_num"]), str(r["blocked_status"])))

    def _end(self, db: Connector, row: WorkRow, how: Settled) -> None:
        """A call ended without being sent; its record joins the history."""
        db.execute("end_call", {**self._at(row), "status": how.status, "entry": db.json_in(how.entry),
                                "doubt": how.doubt, "now_ms": _ms(time.time())})
        db.execute("record_call", {**self._at(row), "sent": False})
        self._halt(db, how.halt, how.judge)

    def _halt(self, db: Connector, halt: str | None, judge: Judge | None) -> bool:
        """The task halted for ``halt``, or for what ``judge`` says of its counts: whether it was."""
        if halt is None and judge is not None:
            halt = judge(budget_counts(db, self.task))
        if halt:
            db.execute("halt_task", {"task": self.task, "reason": halt})
        return bool(halt)

    def gate(self, row: WorkRow, key: str | None, step_id: str, rnd: int, serial: str | None = None
             ) -> int | None:
        """``claimed → sent``, only while this runner's lease is alive and the task not halted: the
        call's fencing epoch (higher than any earlier runner's of the call), or None.  A halt
        either is seen here or is made after this call was marked sent (the task's row is read
        ``FOR SHARE`` on PostgreSQL; a SQLite write transaction holds the file).  A call the claim
        moved to sent with other key material is gated again, under a new epoch; one whose
        ``serial`` another call has in flight stays claimed (``BUSY``), read under the task's
        lock, which every claim takes."""
        with self.db.transaction() as db:
            if serial is not None:
                db.lock(self.task)
                busy = db.one("serial_busy", {**self._at(row), "serial": serial})
                if busy is not None and int(busy["n"]):
                    return BUSY
            now = time.time()
            found = db.one("gate", {**self._at(row), "now": now, "now_ms": _ms(now), "key": key,
                                    "step_id": step_id, "round": rnd, "serial": serial, "claimed": row.epoch})
            return None if found is None else int(found["epoch"])

    def release(self, row: WorkRow) -> None:
        """A call this runner claimed and will not send: back to ready for any runner."""
        self.db.execute("release_call", self._at(row))

    def pace(self, bucket: str, interval: float, tolerance: float) -> float:
        with self.db.transaction() as db:
            # The clock is read once the lock is held: a wait for it is not the bucket's.
            found = db.one("pace", {"task": self.task, "name": bucket, "now": time.time(),
                                    "interval": interval})
        assert found is not None
        return max(0.0, float(found["tat"]) - interval - tolerance - float(found["now"]))

    def held(self, bucket: str) -> float:
        found = self.db.one("held", {"task": self.task, "name": bucket, "now": time.time()})
        return 0.0 if found is None else max(0.0, float(found["left"]))

    def hold(self, bucket: str, seconds: float) -> None:
        self.db.execute("hold", {"task": self.task, "name": bucket, "now": time.time(), "seconds": seconds})

    def _outcome(self, db: Connector, row: WorkRow, status: str, entry: Entry, detail: Any, *,
                 doubt: str | None) -> dict[str, Any]:
        """The parameters of ``done_call``: the outcome recorded while the call is this runner's,
        and its record in the history (one statement where the database has one), a row when it
        was."""
        return {
            **self._at(row), "status": status, "entry": db.json_in(entry), "detail": db.json_in(detail),
            "doubt": doubt, "key": entry.get("key"), "step_id": entry.get("step_id"),
            "now_ms": _ms(time.time()), "sent": True}

    def _done(self, db: Connector, row: WorkRow, status: str, entry: Entry, detail: Any, *,
              doubt: str | None) -> bool:
        """The outcome recorded while the call is this runner's, and its record in the history."""
        return bool(db.all("done_call", self._outcome(db, row, status, entry, detail, doubt=doubt)))

    def done_and_claim(self, outcome: Done, *, limit: int, cap: int,
                       gate_run: int | None = None) -> tuple[bool, list[WorkRow]]:
        """A call's outcome (no tables, no halt) recorded and the next calls claimed (with
        ``gate_run``, and moved to sent as ``claim`` does), in one transaction under the task's
        lock: whether the outcome was recorded, and the calls claimed (none unless it was: a call
        not recorded is no longer this runner's)."""
        with self.db.transaction() as db:
            db.lock(self.task)
            # The outcome goes with the claim's reads: when it was not recorded they read for
            # nothing, and nothing is taken.
            (done,), rows = self._claim(db, limit, cap, gate_run, before=[("done_call", self._outcome(
                db, outcome.row, outcome.status, outcome.entry, outcome.detail, doubt=outcome.doubt))])
            return done, rows

    def done_all(self, outcomes: Sequence[Done]) -> list[bool]:
        """Outcomes recorded in one transaction: whether each was (False: taken back)."""
        with self.db.transaction() as db:
            return [self._done(db, d.row, d.status, d.entry, d.detail, doubt=d.doubt) for d in outcomes]

    def done(self, row: WorkRow, status: str, entry: Entry, detail: Any, *, doubt: str | None,
             tables: dict[str, list[Any]] | None = None, prefix: str = "", into: str | None = None,
             halt: str | None = None, sent: bool = True, judge: Judge | None = None) -> bool:
        """Record a call's outcome, with the table rows it gave and why it halts the task, in one
        transaction; False when the call is no longer this runner's (taken back)."""
        with self.db.transaction() as db:
            if halt or judge is not None:
                # The halt changes the task's row after the call's: the task's lock first; under
                # it, a budget's count sees every other runner's outcome that counted before.
                db.lock(self.task)
            if not sent:
                db.execute("not_sent", self._at(row))
            if not self._done(db, row, status, entry, detail, doubt=doubt):
                return False
            if self._halt(db, halt, judge):
                # A gate that read the task's row waits for this to commit; the call is done once
                # the halt holds.
                db.execute("done_now", {**self._at(row), "now_ms": _ms(time.time())})
            for name, rows in (tables or {}).items():
                db.execute("keep_table_rows", {**self._at(row), "name": name, "prefix": prefix, "into": into,
                                               "rows": db.json_in(rows)})
            return True

    def expand(self, row: WorkRow, work: list[tuple[Any, ...]]) -> bool:
        """Put the calls of a step over an earlier step's table in place of its placeholder."""
        with self.db.transaction() as db:
            if db.execute("take_placeholder", self._at(row)) != 1:
                return False
            with db.bulk("insert_work") as write:
                for values in work:
                    write(values)
            return True

    def landed(self, key: str) -> tuple[Entry, Any] | None:
        """The entry and detail of a call of ``key`` that completed in the run the task is in."""
        found = self.db.one("landed", {"task": self.task, "key": key})
        if found is None:
            return None
        if found["split"]:
            # Read from a history that keeps an entry's detail apart: put back in its place.
            entry = as_entry(join_entry(found["entry"], found["detail"]))
            return entry, entry.get("detail")
        return as_entry(self.db.json_out(found["entry"])), self.db.json_out(found["detail"])

    def kept_keys(self, num: int) -> set[str]:
        """The keys of the calls step ``num`` holds (done, in doubt or in flight)."""
        return {str(r["key_text"]) for r in self.db.all("kept_keys", {"task": self.task, "num": num})}

    def planned(self, num: int) -> Planned:
        """What the plan holds of step ``num``: its rows, and the ``idx`` its next call takes."""
        found = planned_steps(self.db.all("planned_steps", {"task": self.task}))
        return found.get(num, Planned(0, 0, False))

    def halt(self, reason: str) -> None:
        self.db.execute("halt_task", {"task": self.task, "reason": reason})

    def open_counts(self) -> tuple[int, int, str | None]:
        """Calls ready, calls claimed or sent (by anyone), and why the task halted (or None)."""
        found = self.db.one("open_counts", {"task": self.task})
        assert found is not None
        return int(found["ready"] or 0), int(found["held"] or 0), found["halted"]

    def details(self, nums: list[int]) -> dict[int, Any]:
        """The detail each step gives references: that of its last call that completed."""
        return {int(r["num"]): self.db.json_out(r["detail"])
                for r in self.db.all("details", {"task": self.task, "nums": self.db.json_in(nums)})}

    def table(self, num: int, name: str | None) -> tuple[list[str], list[Any]]:
        """The names of the tables step ``num`` gave, and the rows of ``name`` in call order."""
        names = [str(r["name"]) for r in self.db.all("table_names", {"task": self.task, "num": num})]
        if name is None:
            return names, []
        rows: list[Any] = []
        for r in self.db.stream("table_parts", {"task": self.task, "num": num, "name": name}):
            rows.extend(self.db.json_out(r["rows"]))
        return names, rows
