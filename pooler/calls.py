"""One call of a step: its params made ready, its key weighed against the journal, the request
sent (with retries), the tables written, and the answer's entry built and recorded.

``prepare`` runs on the scheduler's thread (it reads the details of steps done); ``execute`` may
run on a worker thread and touches only the client, the table writer, the journal and the
reporter, which are all safe to share.
"""

from __future__ import annotations

import json
import random
import threading
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pooler.callargs import read_jsonl_fields
from pooler.client import Reply, ToolRunClient
from pooler.errors import PoolerError, StoreError
from pooler.journal import CallId, CallRecord, Journal
from pooler.model import Retry, Step
from pooler.redact import Redactor
from pooler.refs import Ref, apply_refs
from pooler.reporter import Reporter
from pooler.tables import TableWriter
from pooler.values import substitute

InDoubt = Literal["retry", "stop", "skip"]
#: Without a ``retry`` of its own, a call that surely never reached the store is tried 3 times.
DEFAULT_RETRY = Retry(attempts=3, backoff_ms=200, on_in_doubt=False)
_ANSWER_KEYS = ("result", "message", "detail", "tables", "files")


@dataclass
class StepPlan:
    """What is worked out once per step and reused by each of its calls."""

    step: Step
    prefix: str
    params: dict[str, Any]
    refs: list[Ref]
    #: Lower-case names of the earlier steps this one waits for (references and for_each.step).
    deps: set[str]
    templated: bool
    over_rows: bool
    #: For a step over rows sent in chunks: the params field that takes each chunk's rows.
    chunk_field: str | None = None
    #: Rerun of a task with a keyed step over rows: its table file keeps the rows of earlier runs.
    keep_tables: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    written: bool = False
    #: Names of the tables the step's calls gave (read by a later ``for_each.step``).
    tables: set[str] = field(default_factory=set)


@dataclass
class Call:
    """One call of a step: for a step over rows, its row (or chunk of rows)."""

    plan: StepPlan
    row: int | None = None
    last: int | None = None
    data: Any = None
    size: int = 1

    def head(self) -> dict[str, Any]:
        step = self.plan.step
        out: dict[str, Any] = {"num": step.num, "name": step.name, "unit": step.unit,
                               "command": step.command}
        if self.last is not None:
            out["rows"] = [self.row, self.last]
        elif self.row is not None:
            out["row"] = self.row
        return out


@dataclass
class Prepared:
    """A call ready to leave."""

    call: Call
    params: dict[str, Any]
    key: str | None
    ids: CallId
    serial: str | None = None
    #: The step id of the call an earlier run left in doubt, when this one sends it again.
    doubted: str | None = None
    number: int = 0


@dataclass
class Outcome:
    """A call's one status, its entry in the answer, and the detail that feeds references."""

    call: Call
    status: str
    entry: dict[str, Any]
    detail: Any = None
    #: Stops the pool whatever stop_on_error says (a key in doubt under ``--in-doubt stop``).
    halt: bool = False
    #: What was done about a call found in doubt: retried, stopped or skipped.
    in_doubt: str | None = None
    step_id: str | None = None
    #: The call an earlier run left in doubt, which this one sent again: the in-doubt list names it.
    doubted: str | None = None


def render_key(template: str, scope: Mapping[str, Any]) -> str:
    value = substitute(template, scope)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def serial_value(params: Any, path: str) -> str | None:
    """The JSON-canonical value at the dotted ``path`` of ``params``; None puts no constraint."""
    value: Any = params
    rest = path
    while rest:
        if isinstance(value, dict) and rest in value:
            value, rest = value[rest], ""
            break
        part, _, rest = rest.partition(".")
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    if value is None or isinstance(value, dict | list):
        return None
    return json.dumps(value, sort_keys=True)


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

    def __post_init__(self) -> None:
        self._vars = dict(self.variables)

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
                # The journal keeps keys as everything else: with secrets masked.
                ids = self.call_ids(call, self.redactor.text(key), None)
                found = self.keyed.get(ids.key or "")
                if found is not None and (found.done or found.doubtful):
                    earlier = self._earlier(call, ids.key or "", found)
                    if earlier is not None:
                        return earlier
            params = substitute(plan.params, scope) if plan.templated else plan.params
            if plan.chunk_field is not None:
                params = {**params, plan.chunk_field: call.data}
            params = apply_refs(params, plan.refs, details)
            params = read_jsonl_fields(params, self.base)
        except PoolerError as exc:
            return self.not_sent(call, ids, "failed", exc.message)
        found = self.keyed.get(ids.key) if ids.key is not None else None
        if found is not None:
            ids = replace(ids, round=_round_after(found))
        ready = Prepared(call, params, key, ids)
        ready.doubted = found.step_id if found is not None and found.doubtful else None
        if self.serialize_on:
            ready.serial = serial_value(params, self.serialize_on)
        return ready

    def call_ids(self, call: Call, key: str | None, step_id: str | None) -> CallId:
        if step_id is None:
            row = "" if call.row is None else f"-{call.row}"
            step_id = f"{self.task}-{call.plan.step.num}{row}-{self.run}"
        return CallId(self.task, self.run, call.plan.step.num, call.row, key, step_id)

    def _earlier(self, call: Call, key: str, found: CallRecord) -> Outcome | None:
        """A key an earlier run of the task recorded: done is skipped; in doubt follows the policy."""
        if found.done and found.result is None:
            # Keys of steps over rows are kept without their records: read this one now.
            found = self.journal.record_of(self.task, key) or found
        ids = replace(self.call_ids(call, key, found.step_id), round=found.round)
        head = {**call.head(), "status": "skipped", "key": key, "step_id": found.step_id}
        if found.done:
            entry = {**head, **_recorded(found.result)}
            if found.in_doubt:
                entry["in_doubt"] = True
            entry = self.redactor.value(entry)
            self.journal.record(ids, "skipped", entry, in_doubt=found.in_doubt)
            return Outcome(call, "skipped", entry, found.detail, step_id=found.step_id,
                           in_doubt="skipped" if found.in_doubt else None)
        if self.in_doubt_policy == "retry":
            return None
        if self.in_doubt_policy == "skip":
            entry = {**head, "in_doubt": True, "result": True,
                     "message": f"counted done without its answer: the call {found.step_id} was sent "
                                "and its answer never came back (--in-doubt skip)."}
            entry = self.redactor.value(entry)
            self.journal.record(ids, "skipped", entry, in_doubt=True)
            return Outcome(call, "skipped", entry, None, in_doubt="skipped", step_id=found.step_id)
        step = call.plan.step
        named = f" ({step.name})" if step.name else ""
        message = (f"Step {step.num}{named} was sent as {found.step_id} and its answer never came back: "
                   "it may or may not have been carried out. Check the store, then run the task again "
                   "with --in-doubt skip (it was done) or --in-doubt retry (send it again with the "
                   "same Idempotency-Key).")
        entry = self.redactor.value({**call.head(), "status": "in_doubt", "key": key,
                                     "step_id": found.step_id, "result": False, "message": message})
        self.journal.record(ids, "in_doubt", entry)
        return Outcome(call, "in_doubt", entry, None, halt=True, in_doubt="stopped",
                       step_id=found.step_id)

    def not_sent(self, call: Call, ids: CallId, status: str, message: str) -> Outcome:
        """A call that never reached the store: the short entry of the seed."""
        entry = self.redactor.value({**call.head(), "status": status, "key": ids.key, "result": False,
                                     "message": message})
        self.journal.record(ids, status, entry)
        return Outcome(call, status, entry)

    # Sending (any thread)

    def execute(self, ready: Prepared) -> Outcome:
        call = ready.call
        step = call.plan.step
        self.reporter.step_started(step, ready.number)
        record = self.journal.record_sent(ready.ids) if ready.key is not None else None
        try:
            reply, retried = self._send(ready)
        except StoreError as exc:
            status = "in_doubt" if exc.sent else "failed"
            entry = {**call.head(), "status": status, "key": ready.key}
            if exc.sent:
                entry["step_id"] = ready.ids.step_id
            entry = self.redactor.value({**entry, "result": False, "message": exc.message})
            self._done(ready, record, status, entry, sent=exc.sent)
            return Outcome(call, status, entry, step_id=ready.ids.step_id,
                           in_doubt="retried" if ready.doubted else None, doubted=ready.doubted)
        data = reply.data
        status = "completed" if reply.result else "failed"
        tables: dict[str, Any] = {}
        note = ""
        if data.get("tables"):
            try:
                tables = self._write_tables(call, data["tables"])
            except (PoolerError, OSError) as exc:
                status = "failed"
                note = (f" The store carried the call out, but its tables could not be written: "
                        f"{getattr(exc, 'message', exc)}")
        entry = self._entry(ready, status, reply, tables, note)
        if ready.doubted or retried:
            # Sent again after a lost answer: only a store that honours the key ran it once.
            entry["sent_again"] = ready.doubted or ready.ids.step_id
        entry = self.redactor.value(entry)
        detail = data.get("detail")
        self._done(ready, record, status, entry, sent=True)
        return Outcome(call, status, entry, detail, step_id=ready.ids.step_id,
                       in_doubt="retried" if ready.doubted or retried else None, doubted=ready.doubted)

    def _done(self, ready: Prepared, record: int | None, status: str, entry: dict[str, Any], *,
              sent: bool) -> None:
        if record is not None:
            self.journal.record_done(record, status, entry)
        else:
            self.journal.record(ready.ids, status, entry, sent=sent)

    def _send(self, ready: Prepared) -> tuple[Reply, bool]:
        """The reply, and whether a try whose answer was lost was tried again."""
        step = ready.call.plan.step
        retry = step.retry or DEFAULT_RETRY
        # An in-doubt call may have been carried out: sending it again is safe only when the
        # Idempotency-Key lets the store answer a repeat without running it twice.
        again_in_doubt = retry.on_in_doubt and ready.key is not None
        idem = None
        if ready.key is not None:
            idem = f"{self.task}:{ready.key}" + (f"/{ready.ids.round}" if ready.ids.round > 1 else "")
        tries = 0
        retried = False
        while True:
            tries += 1
            try:
                reply = self.client.tool_run(step.unit, step.command, ready.params, debug=step.debug,
                                             idempotency_key=idem)
            except StoreError as exc:
                if tries >= max(retry.attempts, 1) or (exc.sent and not again_in_doubt):
                    raise
                delay = retry.backoff_ms / 1000 * 2 ** (tries - 1) * random.uniform(0.75, 1.25)  # noqa: S311 - jitter, not a secret
                if self.stop.wait(delay):
                    raise
                retried = retried or exc.sent
                continue
            return reply, retried

    def _write_tables(self, call: Call, tables: Any) -> dict[str, Any]:
        """The answer's tables written (rows masked one by one as they go: a store may echo a
        secret into its rows, and table and job files leave the process)."""
        plan = call.plan
        if not isinstance(tables, Mapping):
            tables = {}
        if not plan.over_rows:
            return self.writer.write(plan.prefix, tables, into=plan.step.into, redactor=self.redactor)
        # The calls of a step over rows share its files: the first one of this run starts them
        # afresh (unless a rerun keeps the rows its skipped calls wrote), the others append.
        with plan.lock:
            append = plan.written or plan.keep_tables
            written = self.writer.write(plan.prefix, tables, into=plan.step.into, append=append,
                                        redactor=self.redactor)
            plan.written = True
        return written

    def _entry(self, ready: Prepared, status: str, reply: Reply, tables: dict[str, Any],
               note: str) -> dict[str, Any]:
        data = reply.data
        entry = {**ready.call.head(), "status": status, "key": ready.key, "step_id": ready.ids.step_id}
        for name in _ANSWER_KEYS:
            if name in data:
                entry[name] = tables if name == "tables" else data[name]
        if note:
            entry["message"] = f"{entry.get('message', '')}{note}".strip()
        extras = {k: v for k, v in data.items() if k not in _ANSWER_KEYS}
        for name, value in extras.items():
            # A store's extra key never hides one of the entry's own.
            entry[name if name not in entry and name != "time" else f"store_{name}"] = value
        entry["time"] = reply.time()
        return entry


def _round_after(found: CallRecord) -> int:
    """The round of a key to send again: the same one while its fate is unknown (the store may
    answer the repeat from its first try), the next one after the store refused it."""
    if found.doubtful:
        return found.round
    if found.status == "failed" and found.result is not None and found.result.get("result") is True:
        # The store carried it out and only the tables failed here: its stored answer is wanted.
        return found.round
    return found.round + 1


def _recorded(result: dict[str, Any] | None) -> dict[str, Any]:
    """What a recorded entry says of the call's answer: result, message, detail, tables... time."""
    if not result:
        return {"result": True, "message": ""}
    skip = {"num", "name", "unit", "command", "row", "rows", "status", "key", "step_id", "in_doubt"}
    return {k: v for k, v in result.items() if k not in skip}
