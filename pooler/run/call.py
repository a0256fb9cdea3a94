"""One call of a step: its params made ready, the request sent (with retries), the tables
written, and the answer's entry built.  Where the call comes from and where its outcome is
recorded is the runner's (``runner.py``): its work row in the journal.

``prepare`` runs on the runner's thread (it reads the details of steps done); ``execute`` may run
on a worker thread and touches only the client, the table writer and the reporter, which are all
safe to share.
"""

from __future__ import annotations

import random
import threading
import time
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pooler.client import answer_kinds as kinds
from pooler.client.arguments import read_jsonl_fields
from pooler.client.http import MAX_RETRY_AFTER, Reply, ToolRunClient
from pooler.client.reply import IN_DOUBT
from pooler.client.sendgate import held
from pooler.errors import PoolerError, StoreError
from pooler.journal.documents import Conflict
from pooler.journal.records import CallId
from pooler.pool.model import Retry
from pooler.pool.refusals import busy_refusal
from pooler.pool.variables import render_key
from pooler.redact import Redactor
from pooler.run.callplan import Call, Outcome, Prepared, StepState
from pooler.run.conflicts import conflict_message
from pooler.run.entries import ANSWER_KEYS, LANDED, NOT_LANDED, UNSETTLED, not_sent
from pooler.run.events import CallEnd, Reporter
from pooler.run.flow import Flow
from pooler.run.identity import chunk_key, idempotency_header, job_call, step_id
from pooler.run.pacing import MIN_PAUSE
from pooler.run.probing import SETTLE, Verdict, probe_params, send_probe, settled_text, weigh
from pooler.run.tables import RowsTooDeepError, TableWriter
from pooler.statuses import CallStatus, InDoubtAction

#: Without a ``retry`` of its own, a call that surely never reached the store is tried 3 times.
DEFAULT_RETRY = Retry(attempts=3, backoff_ms=200, on_in_doubt=False)


@dataclass
class CallRunner:
    """Everything a call needs, shared by all calls of a run."""

    client: ToolRunClient
    task: str
    run: int
    writer: TableWriter
    redactor: Redactor
    reporter: Reporter
    stop: threading.Event
    variables: Mapping[str, Any]
    base: Path
    #: The task an Idempotency-Key names, when not ``task``: the key scope whose tasks share keys
    #: (the MCP server's session, whose every pool is a task of its own).
    key_task: str | None = None
    #: A call in doubt of a step with a probe is probed (unless the command line's --in-doubt said
    #: what to do with calls in doubt).
    probing: bool = True
    #: What learns from every request's answer (the width, the pause, the breaker); None: nothing.
    flow: Flow | None = None
    #: The calls of a saved plan's apply whose rows moved in the store since the plan (the task
    #: keeps them): no run of the task sends them (its resume, a redrive), as the plan they were
    #: reviewed in no longer holds; each ends not run, saying what moved.
    conflicts: Sequence[Conflict] = ()

    def __post_init__(self) -> None:
        self._vars = dict(self.variables)
        #: Their messages, by step and first row.
        self._held = {(c["step"], (c["rows"] or [0])[0]): conflict_message(c) for c in self.conflicts}
        #: What this run changed of each step's table files, by step number.
        self._states: dict[int, StepState] = {}

    # Preparing (scheduler thread)

    def prepare(self, call: Call, details: Mapping[str, Any]) -> Prepared | Outcome:
        plan = call.plan
        step = plan.step
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
            params = plan.params.fill(scope, details)
            if plan.chunk_field is not None:
                params = plan.chunk_params(params, call.data, self._vars)
            params = read_jsonl_fields(params, self.base)
            body = self.client.encode(step.unit, step.command, params, debug=step.debug)
        except PoolerError as exc:
            return self.not_sent(call, ids, CallStatus.FAILED, exc.message)
        held = self._held.get((step.num, call.row or 0))
        if held is not None:
            return self.not_sent(call, ids, CallStatus.NOT_RUN, held)
        return Prepared(call, params, key, ids, body=body)

    def call_ids(self, call: Call, key: str | None, given: str | None) -> CallId:
        if given is None:
            given = step_id(self.task, call.plan.step.num, call.row, self.run)
        return CallId(self.task, self.run, call.plan.step.num, call.row, key, given)

    def not_sent(self, call: Call, ids: CallId, status: str, message: str) -> Outcome:
        """A call that never reached the store: the short entry of the seed."""
        entry = self.redactor.value(not_sent(call.head(), status, ids.key, message))
        return Outcome(call, status, entry)

    # Sending (any thread)

    def execute(self, ready: Prepared) -> Outcome:
        call = ready.call
        step = call.plan.step
        # Reported once the journal has taken the call (its gate): a journal that fails before (a
        # full disk) leaves the call unsent and uncounted.
        self.reporter.step_started(step, ready.number)
        if ready.again:
            # Sent again after its probe proved it not carried out: once, whatever it meets now.
            outcome = self._once(ready)
            outcome.entry["probe"] = NOT_LANDED
            return outcome
        probing = self.probing and step.probe is not None and call.plan.probe is not None
        if probing and ready.doubted:
            # Found in doubt by an earlier run: the probe first, the call only if it proves it never ran.
            verdict = self._probe(ready)
            if verdict.said == NOT_LANDED:
                return self._not_landed(ready, verdict)
            outcome = self._settled(ready, verdict, None)
            self.reporter.call_ended(step, CallEnd(ready.number, InDoubtAction.PROBED, 0), outcome.entry)
            return outcome
        outcome = self._once(ready)
        if not probing or outcome.status != CallStatus.IN_DOUBT:
            return outcome
        verdict = self._probe(ready)
        if verdict.said == NOT_LANDED:
            return self._not_landed(ready, verdict)
        return self._settled(ready, verdict, outcome)

    def _probe(self, ready: Prepared) -> Verdict:
        call = ready.call
        assert call.plan.probe is not None
        try:
            params = probe_params(call.plan.probe, call.data, call.last is not None, self._vars)
        except PoolerError as exc:
            return Verdict(UNSETTLED, message=f"its params could not be filled: {exc.message}")
        step = call.plan.step
        assert step.probe is not None
        # A store is given at least as long as this run waits for an answer.
        settle = max(SETTLE, float(self.client.read_timeout))
        return weigh(send_probe(self.client, step, params), ready, step.probe.command, settle)

    def _not_landed(self, ready: Prepared, verdict: Verdict) -> Outcome:
        """Proven not carried out by its probe: failed as a refusal is (a later run sends it under
        the key's next round), and marked for the runner to send again now, once."""
        call = ready.call
        step_id = ready.doubted or ready.ids.step_id
        entry = not_sent(call.head(), CallStatus.FAILED, ready.key,
                         f"The call {step_id} was in doubt, and its probe proved it not carried out "
                         f"({verdict.message}).", step_id=step_id)
        entry["probe"] = NOT_LANDED
        return Outcome(call, CallStatus.FAILED, self.redactor.value(dict(entry)), step_id=step_id,
                       in_doubt=InDoubtAction.PROBED if ready.doubted else None, doubted=ready.doubted,
                       send_again=True)

    def _settled(self, ready: Prepared, verdict: Verdict, outcome: Outcome | None) -> Outcome:
        """The call as its probe left it: landed (completed, with the detail the probe named), or
        still in doubt."""
        call = ready.call
        step_id = ready.doubted or ready.ids.step_id
        found_before = InDoubtAction.PROBED if ready.doubted else None
        if verdict.said == LANDED:
            entry: dict[str, Any] = {**call.head(), "status": CallStatus.COMPLETED, "key": ready.key,
                                     "step_id": step_id, "result": True,
                                     "message": settled_text(verdict, step_id), "probe": LANDED}
            if outcome is not None and "time" in outcome.entry:
                entry["time"] = outcome.entry["time"]
            return Outcome(call, CallStatus.COMPLETED, self.redactor.value(entry), verdict.detail,
                           step_id=step_id, in_doubt=found_before, doubted=ready.doubted)
        if outcome is None:
            left = not_sent(call.head(), CallStatus.IN_DOUBT, ready.key,
                            settled_text(verdict, step_id, f"The call {step_id} was sent by an earlier run "
                                         "and its answer never came back."), step_id=step_id)
            outcome = Outcome(call, CallStatus.IN_DOUBT, left.copy(), step_id=step_id, in_doubt=found_before,
                              doubted=ready.doubted)
        else:
            outcome.entry["message"] = settled_text(verdict, step_id, str(outcome.entry.get("message") or ""))
        outcome.entry["probe"] = UNSETTLED
        outcome.entry = self.redactor.value(outcome.entry)
        return outcome

    def _once(self, ready: Prepared) -> Outcome:
        """The call sent (with its retries), and its outcome."""
        call = ready.call
        step = call.plan.step
        try:
            reply, retried = self._send(ready)
        except StoreError as exc:
            kind = exc.kind or (kinds.RESET if exc.sent else kinds.NOT_SENT)
            message = exc.message
            if ready.maybe_ran and kind.proven_not_run:
                # The last try never left, but an earlier one did and lost its answer: in doubt.
                kind = kinds.RESET
                message += f" An earlier try of the call left and its answer was lost; {IN_DOUBT}."
            status = kind.status
            entry = {**call.head(), "status": status, "key": ready.key}
            if exc.sent or ready.maybe_ran:
                entry["step_id"] = ready.ids.step_id
            entry = self.redactor.value({**entry, "result": False, "message": message})
            self.reporter.call_ended(step, CallEnd(ready.number, kind.name, ready.attempts), entry)
            return Outcome(call, status, entry, step_id=ready.ids.step_id,
                           in_doubt=InDoubtAction.RETRIED if ready.doubted else None, doubted=ready.doubted,
                           unsent=kind is kinds.NOT_SENT and not ready.maybe_ran)
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
        if kind is kinds.BUSY and ready.maybe_ran:
            # Turned away now, but an earlier try left and lost its answer: it may have landed.
            status = CallStatus.IN_DOUBT
            note += f" An earlier try of the call left and its answer was lost; {IN_DOUBT}."
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
        return Outcome(call, status, entry, detail, step_id=ready.ids.step_id,
                       in_doubt=InDoubtAction.RETRIED if ready.doubted or retried else None,
                       doubted=ready.doubted, busy=kind is kinds.BUSY, next_round=ready.next_round)

    def _send(self, ready: Prepared) -> tuple[Reply, bool]:
        """The reply, and whether a try whose answer was lost was tried again."""
        step = ready.call.plan.step
        retry = step.retry or DEFAULT_RETRY
        # An in-doubt call may have been carried out: sending it again is safe only when the
        # Idempotency-Key lets the store answer a repeat without running it twice.
        again_in_doubt = retry.on_in_doubt and ready.key is not None
        idem = None
        if ready.key is not None:
            idem = idempotency_header(self.key_task or self.task, ready.key, ready.ids.round)
        # Sent again after a busy answer or a busy refusal, a call goes on counting its tries.
        tries = ready.attempts if ready.carried else 0
        retried = ready.retried if ready.carried else False
        ready.next_round = False
        if not ready.carried:
            ready.maybe_ran = ready.lost = False
        first = time.monotonic()
        while True:
            tries += 1
            ready.attempts = tries
            began = time.monotonic()
            try:
                reply = self.client.tool_run(step.unit, step.command, ready.params, debug=step.debug,
                                             idempotency_key=idem, encoded=ready.body)
            except StoreError as exc:
                if not exc.sent:
                    # A request that left and lost its answer (a reset, a timeout) teaches the flow
                    # nothing: a store going down breaks the calls in flight so, and so may one up.
                    self._learn(began, first, down=True)
                ready.maybe_ran = ready.maybe_ran or exc.sent
                ready.lost = ready.lost or (exc.sent and not (exc.kind or kinds.RESET).over)
                tripped = self.flow is not None and self.flow.tripped and not exc.sent
                if tries >= max(retry.attempts, 1) or (exc.sent and not again_in_doubt) or tripped:
                    # With the breaker open, a call that never left is not tried again: the
                    # runner puts it back for when the store answers.
                    raise
                if self.stop.wait(_backoff(retry, tries)):
                    raise
                retried = retried or exc.sent
                continue
            kind = reply.kind
            ready.maybe_ran = ready.maybe_ran or kind.fate is kinds.Fate.IN_DOUBT
            ready.lost = ready.lost or not kind.over
            asked = None if reply.retry_after is None else min(reply.retry_after, MAX_RETRY_AFTER)
            if kind is kinds.BUSY:
                # However little the store asks, the task pauses at least a moment: a Retry-After
                # of a millisecond would have every call spin against the store's door.
                asked = max(asked or 0.0, MIN_PAUSE)
            self._learn(began, first, busy=kind is kinds.BUSY, gateway=kind is kinds.GATEWAY,
                        retry_after=asked)
            if kind is kinds.BUSY:
                # Not carried out, and no try used: the runner sends it again behind the task's
                # pause (every runner of the task keeps it) while the step's patience lasts.
                ready.attempts = tries - 1
                ready.retried = retried
                return reply, retried
            more = tries < max(retry.attempts, 1)
            if more and kind is kinds.REFUSED and self._busy_refusal(retry, reply):
                # Refused as busy (a lock another client holds): not carried out, so it is sent
                # again after the backoff, by the runner, under its key's next round.
                ready.next_round = not self.stop.wait(_backoff(retry, tries))
                ready.retried = retried
                return reply, retried
            if more and (kind.wait or (kind.fate is kinds.Fate.IN_DOUBT and again_in_doubt)):
                # Never sent: as long as the attempts last.  In doubt: as for a lost answer.
                delay = _backoff(retry, tries)
                if not self.stop.wait(delay):
                    retried = retried or not kind.proven_not_run
                    reply.release()
                    continue
            return reply, retried

    def _busy_refusal(self, retry: Retry, reply: Reply) -> bool:
        """Whether a refusal is one its step's ``retry.refusals`` names."""
        if not retry.refusals:
            return False
        message = reply.data.get("message")
        return isinstance(message, str) and busy_refusal(retry.refusals)(message)

    def _learn(self, began: float, first: float, **answered: Any) -> None:
        if self.flow is not None:
            # What the store took: the wait for the call's slot (``sendgate.held``) is not its.
            self.flow.attempted(ms=(time.monotonic() - began - held()) * 1000, since=first, **answered)

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

