"""One call of a step: its params made ready, its key weighed against the journal, the request
sent (with retries), the tables written, and the answer's entry built and recorded.

``prepare`` runs on the scheduler's thread (it reads the details of steps done); ``execute`` may
run on a worker thread and touches only the client, the table writer, the journal and the
reporter, which are all safe to share.
"""

from __future__ import annotations

import random
import threading
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pooler.client import answer_kinds as kinds
from pooler.client.arguments import read_jsonl_fields
from pooler.client.http import MAX_RETRY_AFTER, Reply, ToolRunClient
from pooler.client.reply import IN_DOUBT
from pooler.errors import PoolerError, StoreError
from pooler.journal.records import CallId, CallRecord
from pooler.journal.sqlite.journal import Journal
from pooler.journal.timeline import epoch_ms
from pooler.pool.model import Retry
from pooler.pool.variables import render_key
from pooler.redact import Redactor
from pooler.run.callplan import Call, Outcome, Prepared, StepPlan, StepState, serial_value
from pooler.run.entries import ANSWER_KEYS, IDENTITY_KEYS, not_sent
from pooler.run.events import CallEnd, Reporter
from pooler.run.identity import chunk_key, chunk_span, idempotency_header, job_call, step_id
from pooler.run.rulings import rule_in_doubt
from pooler.run.tables import RowsTooDeepError, TableWriter
from pooler.statuses import CallStatus

InDoubt = Literal["retry", "stop", "skip"]
#: Without a ``retry`` of its own, a call that surely never reached the store is tried 3 times.
DEFAULT_RETRY = Retry(attempts=3, backoff_ms=200, on_in_doubt=False)
#: In a journal entry only: the step id of the call found in doubt that this call sent again.
_DOUBTED = "doubted"


@dataclass
class CallRunner:
    """Everything a call needs, shared by all calls of a run."""

    client: ToolRunClient
    journal: Journal
    task: str
    run: int
    writer: TableWriter
    redactor: Redactor
    reporter: Reporter
    stop: threading.Event
    variables: Mapping[str, Any]
    base: Path
    keyed: dict[str, CallRecord]
    in_doubt_policy: InDoubt = "retry"
    serialize_on: str | None = None
    #: Runs of the task going on in other processes (``Journal.live_runs``): their unanswered calls
    #: are theirs, not in doubt.
    live_runs: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        self._vars = dict(self.variables)
        #: The chunks this task recorded: (key of the first row, first row) -> last row.
        self._spans: dict[tuple[str, int], int] = {}
        #: What this run changed of each step's table files, by step number.
        self._states: dict[int, StepState] = {}
        for key in self.keyed:
            span = chunk_span(key)
            if span is not None:
                self._spans[(span[0], span[1])] = span[2]

    def recorded_span(self, plan: StepPlan, first: int, row: Any) -> int | None:
        """The last row of the chunk an earlier run of the task sent from row ``first``, when it
        began with this row's key: the chunk is cut the same way again, so the rows it carried are
        neither sent twice nor left out (a ``--sample`` run continued by a full one)."""
        if plan.step.key is None or not self._spans:
            return None
        try:
            key = render_key(plan.step.key, ChainMap({"row": row}, self._vars))
        except PoolerError:
            return None
        return self._spans.get((self.redactor.text(key), first))

    # Preparing (scheduler thread)

    def prepare(self, call: Call, details: Mapping[str, Any]) -> Prepared | Outcome:
        plan = call.plan
        step = plan.step
        if call.done:
            # Their calls are in the journal under the keys of the plan they were sent by.
            return Outcome(call, CallStatus.SKIPPED, {
                **call.head(), "status": CallStatus.SKIPPED, "key": None, "result": True,
                "message": "done before the task was planned again (--replan): sent under an earlier "
                           "plan's keys"})
        scope: Mapping[str, Any] = self.variables
        if call.data is not None:
            first = call.data[0] if call.last is not None else call.data
            scope = ChainMap({"row": first}, self._vars)
        key: str | None = None
        ids = self.call_ids(call, None, None)
        try:
            if step.key is not None:
                key = render_key(step.key, scope)
                if call.last is not None:
                    # A chunk is known by the rows it carries, not only by its first row's key.
                    key = chunk_key(key, call.row or 0, call.last)
                # The journal keeps keys as everything else: with secrets masked.
                ids = self.call_ids(call, self.redactor.text(key), None)
                found = self.keyed.get(ids.key or "")
                if found is not None and (found.done or found.doubtful):
                    earlier = self._earlier(call, ids.key or "", found)
                    if earlier is not None:
                        return earlier
            params = plan.params.fill(scope, details)
            if plan.chunk_field is not None:
                params = {**params, plan.chunk_field: call.data}
            params = read_jsonl_fields(params, self.base)
            body = self.client.encode(step.unit, step.command, params, debug=step.debug)
        except PoolerError as exc:
            return self.not_sent(call, ids, CallStatus.FAILED, exc.message)
        found = self.keyed.get(ids.key) if ids.key is not None else None
        if found is not None:
            ids = replace(ids, round=_round_after(found))
        ready = Prepared(call, params, key, ids, seen=found.id if found is not None else 0, body=body)
        ready.doubted = found.step_id if found is not None and found.doubtful else None
        if self.serialize_on:
            ready.serial = serial_value(params, self.serialize_on)
        return ready

    def call_ids(self, call: Call, key: str | None, given: str | None) -> CallId:
        if given is None:
            given = step_id(self.task, call.plan.step.num, call.row, self.run)
        return CallId(self.task, self.run, call.plan.step.num, call.row, key, given)

    def _earlier(self, call: Call, key: str, found: CallRecord) -> Outcome | None:
        """A key an earlier run of the task recorded: done is skipped; in doubt follows the policy."""
        if found.done and found.result is None:
            # Keys of steps over rows are kept without their records: read this one now.
            found = self.journal.record_of(self.task, key) or found
        ids = replace(self.call_ids(call, key, found.step_id), round=found.round)
        head = {**call.head(), "status": CallStatus.SKIPPED, "key": key, "step_id": found.step_id}
        if found.done:
            entry = {**head, **_recorded(found.result)}
            if found.in_doubt:
                entry["in_doubt"] = True
            entry = self.redactor.value(entry)
            self.journal.record(ids, CallStatus.SKIPPED, entry, in_doubt=found.in_doubt)
            # A call found in doubt and sent again by an earlier run (which may never have finished
            # to tell it) is named again in this run's answer.
            doubted = (found.result or {}).get(_DOUBTED)
            action = "skipped" if found.in_doubt else "retried" if doubted else None
            return Outcome(call, CallStatus.SKIPPED, entry, found.detail, step_id=found.step_id,
                           in_doubt=action, doubted=doubted if isinstance(doubted, str) else None)
        if found.run in self.live_runs:
            return self._taken(call, key, found)
        ruling = rule_in_doubt(call.head(), call.plan.step, key, found.step_id, self.in_doubt_policy)
        if ruling is None:
            return None
        entry = self.redactor.value(ruling.entry)
        self.journal.record(ids, ruling.status, entry, in_doubt=ruling.status == CallStatus.SKIPPED)
        return Outcome(call, ruling.status, entry, None, halt=ruling.halt, in_doubt=ruling.action,
                       step_id=found.step_id)

    def not_sent(self, call: Call, ids: CallId, status: str, message: str) -> Outcome:
        """A call that never reached the store: the short entry of the seed."""
        entry = self.redactor.value(not_sent(call.head(), status, ids.key, message))
        self.journal.record(ids, status, entry)
        return Outcome(call, status, entry)

    # Sending (any thread)

    def execute(self, ready: Prepared) -> Outcome:
        call = ready.call
        step = call.plan.step
        record = None
        if ready.key is not None:
            claimed = self._claim(ready)
            if isinstance(claimed, Outcome):
                return claimed
            record = claimed
        # Reported once the journal has taken the call: a journal that fails before (a full disk)
        # leaves the call unsent and uncounted.
        self.reporter.step_started(step, ready.number)
        sent_ms = epoch_ms()
        try:
            reply, retried = self._send(ready)
        except StoreError as exc:
            kind = exc.kind or (kinds.RESET if exc.sent else kinds.NOT_SENT)
            status = kind.status
            entry = {**call.head(), "status": status, "key": ready.key}
            if exc.sent:
                entry["step_id"] = ready.ids.step_id
            entry = self.redactor.value({**entry, "result": False, "message": exc.message})
            self.reporter.call_ended(step, CallEnd(ready.number, kind.name, ready.attempts), entry)
            self._done(ready, record, status, entry, sent=exc.sent, sent_ms=sent_ms)
            return Outcome(call, status, entry, step_id=ready.ids.step_id,
                           in_doubt="retried" if ready.doubted else None, doubted=ready.doubted)
        data = reply.data
        status = reply.kind.status
        kind = reply.kind
        tables: dict[str, Any] = {}
        note = ""
        if data.get("tables"):
            try:
                ids = ready.ids
                tables = self._write_tables(call, data["tables"], job_call(ids.task, ids.key, ids.round))
            except RowsTooDeepError as exc:
                # What the store answered cannot be read: as for any answer too deep, in doubt.
                kind = kinds.TOO_DEEP
                status = kind.status
                note = f" {exc.message[:1].upper()}{exc.message[1:]}; {IN_DOUBT}."
            except (PoolerError, OSError) as exc:
                status = CallStatus.FAILED if status == CallStatus.COMPLETED else status
                note = (f" The store carried the call out, but its tables could not be written: "
                        f"{getattr(exc, 'message', exc)}")
        entry = self._entry(ready, status, reply, tables, note)
        if status == CallStatus.IN_DOUBT:
            # Whatever the answer said, its result is not known: as for every call in doubt.
            entry["result"] = False
        if ready.doubted or retried:
            # Sent again after a lost answer: only a store that honours the key ran it once.
            entry["sent_again"] = ready.doubted or ready.ids.step_id
        entry = self.redactor.value(entry)
        reply.release()
        self.reporter.call_ended(step, CallEnd(ready.number, kind.name, ready.attempts), entry)
        detail = data.get("detail")
        self._done(ready, record, status, entry, sent=True, sent_ms=sent_ms, retried=retried)
        return Outcome(call, status, entry, detail, step_id=ready.ids.step_id,
                       in_doubt="retried" if ready.doubted or retried else None, doubted=ready.doubted)

    def _claim(self, ready: Prepared) -> int | Outcome:
        """The key claimed in the journal (the id of the call's ``sent`` record), or the outcome of a
        call whose key another run of the task took since this run read the journal."""
        key = ready.ids.key or ""
        while True:
            got = self.journal.claim(ready.ids, ready.seen)
            if isinstance(got, int):
                return got
            if got.done:
                return self._earlier(ready.call, key, got) or self._taken(ready.call, key, got)
            if got.doubtful:
                return self._taken(ready.call, key, got)
            # Refused since: sent anew, under the round after the refusal.
            ready.ids = replace(ready.ids, round=_round_after(got))
            ready.seen = got.id
            ready.doubted = None

    def _taken(self, call: Call, key: str, found: CallRecord) -> Outcome:
        """Another run of the task sent this key and its answer is not recorded (yet): this run does
        not send it a second time."""
        step = call.plan.step
        named = f" ({step.name})" if step.name else ""
        message = (f"Step {step.num}{named} was not sent: another run of this task sent its key as "
                   f"{found.step_id} while this run went, and its answer is not recorded yet, so it may "
                   "or may not have been carried out. Run the task again to learn what it became.")
        entry = self.redactor.value(not_sent(call.head(), CallStatus.IN_DOUBT, key, message,
                                             step_id=found.step_id))
        self.journal.record(replace(self.call_ids(call, key, found.step_id), round=found.round),
                            CallStatus.IN_DOUBT, entry)
        return Outcome(call, CallStatus.IN_DOUBT, entry, None, step_id=found.step_id)

    def _done(self, ready: Prepared, record: int | None, status: str, entry: dict[str, Any], *,
              sent: bool, sent_ms: int, retried: bool = False) -> None:
        doubted = ready.doubted or (ready.ids.step_id if retried else None)
        if doubted is not None:
            # The journal remembers that this call settled one found in doubt, so the answer of a
            # later run still names it when this run is killed before it answers.
            entry = {**entry, _DOUBTED: doubted}
        if record is not None:
            self.journal.record_done(record, status, entry)
        else:
            self.journal.record(ready.ids, status, entry, sent=sent, sent_ms=sent_ms)

    def _send(self, ready: Prepared) -> tuple[Reply, bool]:
        """The reply, and whether a try whose answer was lost was tried again."""
        step = ready.call.plan.step
        retry = step.retry or DEFAULT_RETRY
        # An in-doubt call may have been carried out: sending it again is safe only when the
        # Idempotency-Key lets the store answer a repeat without running it twice.
        again_in_doubt = retry.on_in_doubt and ready.key is not None
        idem = None
        if ready.key is not None:
            idem = idempotency_header(self.task, ready.key, ready.ids.round)
        tries = 0
        retried = False
        while True:
            tries += 1
            ready.attempts = tries
            try:
                reply = self.client.tool_run(step.unit, step.command, ready.params, debug=step.debug,
                                             idempotency_key=idem, encoded=ready.body)
            except StoreError as exc:
                if tries >= max(retry.attempts, 1) or (exc.sent and not again_in_doubt):
                    raise
                if self.stop.wait(_backoff(retry, tries)):
                    raise
                retried = retried or exc.sent
                continue
            kind = reply.kind
            if tries < max(retry.attempts, 1) and (kind.wait or (kind.fate is kinds.Fate.IN_DOUBT
                                                                 and again_in_doubt)):
                # Not carried out and asked to wait (429, 503 with Retry-After): as long as the store
                # asks, within bounds; a stop cuts the wait short.  In doubt: as for a lost answer.
                delay = reply.retry_after if reply.retry_after is not None else _backoff(retry, tries)
                if delay <= MAX_RETRY_AFTER and not self.stop.wait(delay):
                    retried = retried or not kind.proven_not_run
                    reply.release()
                    continue
            return reply, retried

    def _write_tables(self, call: Call, tables: Any, job_call: str | None) -> dict[str, Any]:
        """The answer's tables written (rows masked one by one as they go: a store may echo a
        secret into its rows, and table and job files leave the process)."""
        plan = call.plan
        if not isinstance(tables, Mapping):
            tables = {}
        if not plan.over_rows:
            return self.writer.write(plan.prefix, tables, into=plan.step.into, redactor=self.redactor,
                                     call=job_call)
        # The calls of a step over rows share its files: the first one of this run starts them
        # afresh (unless a rerun keeps the rows its skipped calls wrote), the others append.
        # setdefault is one step under the GIL: two workers starting the step's files share one state.
        state = self._states.setdefault(plan.step.num, StepState())
        with state.lock:
            append = state.written or plan.keep_tables
            written = self.writer.write(plan.prefix, tables, into=plan.step.into, append=append,
                                        redactor=self.redactor, call=job_call)
            state.written = True
        return written

    def _entry(self, ready: Prepared, status: str, reply: Reply, tables: dict[str, Any],
               note: str) -> dict[str, Any]:
        data = reply.data
        entry = {**ready.call.head(), "status": status, "key": ready.key, "step_id": ready.ids.step_id}
        for name in ANSWER_KEYS:
            if name in data:
                entry[name] = tables if name == "tables" else data[name]
        if note:
            entry["message"] = f"{entry.get('message', '')}{note}".strip()
        extras = {k: v for k, v in data.items() if k not in ANSWER_KEYS}
        for name, value in extras.items():
            # A store's extra key never hides one of the entry's own.
            entry[name if name not in entry and name != "time" else f"store_{name}"] = value
        entry["time"] = reply.time()
        return entry


def _backoff(retry: Retry, tries: int) -> float:
    """Seconds before the next try: the step's backoff, doubled each try, with jitter."""
    return float(retry.backoff_ms / 1000 * 2 ** (tries - 1) * random.uniform(0.75, 1.25))  # noqa: S311 - jitter, not a secret


def _round_after(found: CallRecord) -> int:
    """The round of a key to send again: the same one while its fate is unknown (the store may
    answer the repeat from its first try), the next one after the store refused it."""
    if found.doubtful:
        return found.round
    if found.status == CallStatus.FAILED and found.result is not None and found.result.get("result") is True:
        # The store carried it out and only the tables failed here: its stored answer is wanted.
        return found.round
    return found.round + 1


def _recorded(result: dict[str, Any] | None) -> dict[str, Any]:
    """What a recorded entry says of the call's answer: result, message, detail, tables... time."""
    if not result:
        return {"result": True, "message": ""}
    return {k: v for k, v in result.items() if k not in IDENTITY_KEYS and k != _DOUBTED}
