"""A saved plan (``pooler plan POOL -o FILE``): everything a run decides before its first call, written
to a file that is reviewed, kept as a CI artifact and applied once (``pooler apply FILE``).

The file is JSON Lines: its first line is the plan's head (the pool, its options, the task it
becomes, the store it was planned against, the variables that are no secret and the names of those
that are, the digests of everything it was made from, and each step's counts); every other line is
one call, in the order the calls are planned, with its key and its params where they are known
before the run (a reference to an earlier step's answer stays its text; a secret is ``***``).  A
call of a step with ``compare:`` carries its class (new, changed, unchanged) and what the store
held of each row it sends (``store``: its compared columns, null for a new row), which an apply
reads again (``pooler.run.conflicts``); without one it has neither.  The head comes first so
that ``pooler show`` reads one line, whatever the calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

from pooler import strictjson
from pooler.errors import InputError, JournalError, PoolerError
from pooler.journal.work import TaskJournal
from pooler.pool.compiler import Plan
from pooler.pool.model import Step
from pooler.pool.plan_document import build_plan
from pooler.redact import Redactor
from pooler.run.compare import Classified
from pooler.run.config import values_of
from pooler.run.plandigests import Digest
from pooler.run.workplan import Planner
from pooler.statuses import CompareClass
from pooler.version import __version__

#: The first line's mark, and the version of the format.
MARK = "pooler_plan"
FORMAT = 1
#: What every plan's head holds, and of which kind.
HEAD: dict[str, type] = {"task": str, "pool": str, "planned": str, "digests": list, "calls_sha256": str,
                         "steps": list}
#: The compare classes a call may carry, in the order counts are told.
CLASSES = (CompareClass.NEW, CompareClass.CHANGED, CompareClass.UNCHANGED)


class PlannedCall(TypedDict, total=False):
    """One call of a saved plan."""

    step: int
    #: The call's number within its step, from 1.
    call: int
    #: The data file's rows it sends, numbered as a run's lines and ``redrive --rows`` number them
    #: (from 0): one row, or the first and last of a chunk.
    rows: list[int]
    key: str | None
    params: Any
    #: new, changed or unchanged: only in a step with ``compare:``.
    compare: str
    #: In a step with ``compare:``: each row the call sends, with what the store held of it when
    #: planned (its compared columns; null: no row, a new one).
    store: list[list[Any]]


class StepSummary(TypedDict, total=False):
    num: int
    name: str
    unit: str
    command: str
    #: None: not known before the run (a step over an earlier step's table).
    calls: int | None
    #: Each compare class's calls: only in a step with ``compare:``.
    compare: dict[str, int]


def compare_totals(steps: list[Any]) -> dict[str, int] | None:
    """The calls of every step with ``compare:`` by class; None when no step has one."""
    found = [s["compare"] for s in steps if isinstance(s, dict) and isinstance(s.get("compare"), dict)]
    if not found:
        return None
    return {c: sum(int(f.get(c, 0)) for f in found) for c in CLASSES}


def classes_text(counts: dict[str, int] | None) -> str:
    """``12 new, 40 changed, 99,948 unchanged``; empty without counts."""
    return ", ".join(f"{counts.get(c, 0):,} {c}" for c in CLASSES) if counts else ""


def now_text() -> str:
    """This moment as plans and their messages tell it: UTC, ISO 8601, to the second."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The seam a compare reader fills: the class of a planned call of a step with ``compare:`` (new,
#: changed, unchanged), None for a call of a step without.  A plan made with none has no classes.
Classify = Callable[[Step, PlannedCall], "str | None"]


def _params(planner: Planner, step: Step, values: Mapping[str, Any], data: Any, chunked: bool) -> Any:
    """The call's params as far as they are known before the run: templates filled, references
    kept as their text (their steps have not run); None when a template cannot be filled here."""
    scope: dict[str, Any] = dict(values)
    if data is not None:
        scope["row"] = data[0] if chunked else data
    try:
        params = planner.text_params(step).fill(scope, {})
        plan = planner.plans[step.num]
        if chunked and plan.chunk_field is not None:
            params = plan.chunk_params(params, data, values)
    except PoolerError:
        return None
    return params


def planned_calls(compiled: Plan, task: str, redactor: Redactor, classify: Classify | None = None, *,
                  compared: Mapping[int, Classified] | None = None,
                  stored: Mapping[int, Mapping[int, Any]] | None = None) -> Iterator[PlannedCall]:
    """Every call of the plan, in order, as ``run`` would plan them into its journal, each with its
    compare class where ``classify`` gives one; ``compared``: the steps' compares, whose steps
    plan only the rows they send, as a run does; ``stored``: what the store held of each step's
    changed rows, which each call of a compared step keeps for the rows it sends (an apply reads
    the store again and tells a row that moved since)."""
    values = values_of(compiled.variables)
    planner = Planner(compiled.pool, task, values, compiled.sample, redactor=redactor, beyond=False,
                      compared=compared)
    for step in compiled.pool.steps:
        fe = step.for_each
        data = compiled.data.get(step.num)
        if fe is None:
            works = iter([planner.single(step)])
        elif data is not None:
            works = planner.rows_of(step, data.iter_rows())
        else:
            continue  # over an earlier step's table: its calls are known only once that step ran
        for work in works:
            _, num, idx, _, first, last, _, text, _, _, key, known, _ = work
            rows = None if text is None else json.loads(text)
            call: PlannedCall = {"step": num, "call": idx + 1}
            if first is not None:
                call["rows"] = [first] if last is None else [first, last]
            call["key"] = key if known else None
            call["params"] = redactor.value(_params(planner, step, values, rows, last is not None))
            found = classify(step, call) if classify is not None else None
            if found is not None:
                call["compare"] = found
            keep = (compared or {}).get(num)
            if stored is not None and keep is not None and first is not None:
                held = stored.get(num, {})
                end = first if last is None else last
                call["store"] = [[i, redactor.value(held.get(i))] for i in range(first, end + 1)
                                 if keep.sends(i)]
            yield call


def step_summaries(compiled: Plan) -> list[StepSummary]:
    return [{"num": s.num, "name": s.name, "unit": s.unit, "command": s.command,
             "calls": None if s.for_each is not None and s.num not in compiled.data else 0}
            for s in compiled.pool.steps]


def write_plan(path: Path, head: dict[str, Any], compiled: Plan, redactor: Redactor,
               classify: Classify | None = None, *, compared: Mapping[int, Classified] | None = None,
               stored: Mapping[int, Mapping[int, Any]] | None = None) -> dict[str, Any]:
    """Write the plan to ``path`` (owner-only, whole or not at all) and give back its head.  The
    calls are counted as they are written (each compare class too), to a file beside it, and the
    head goes in front.  With ``compared`` only the rows each compare sends are planned, and the
    step's counts are its rows by class (the unchanged ones are no call)."""
    steps = {s["num"]: s for s in step_summaries(compiled)}
    sha = hashlib.sha256()
    total = 0
    body = path.with_name(f".{path.name}.{os.getpid()}.calls")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with _owner_only(body).open("w", encoding="utf-8") as calls:
            for call in planned_calls(compiled, head["task"], redactor, classify, compared=compared,
                                      stored=stored):
                line = strictjson.dumps(call, ensure_ascii=False) + "\n"
                sha.update(line.encode())
                calls.write(line)
                entry = steps[call["step"]]
                entry["calls"] = (entry.get("calls") or 0) + 1
                if "compare" in call:
                    counts = entry.setdefault("compare", dict.fromkeys(CLASSES, 0))
                    counts[call["compare"]] += 1
                total += 1
        for num, found in (compared or {}).items():
            steps[num]["compare"] = found.doc()
        known = all(s["calls"] is not None for s in steps.values())
        head = {**head, "calls": total if known else None, "calls_sha256": sha.hexdigest(),
                "steps": list(steps.values())}
        with _owner_only(tmp).open("w", encoding="utf-8") as out, body.open(encoding="utf-8") as calls:
            out.write(strictjson.dumps(head, ensure_ascii=False) + "\n")
            while block := calls.read(1 << 20):
                out.write(block)
        tmp.replace(path)
    finally:
        for left in (body, tmp):
            with contextlib.suppress(OSError):
                left.unlink()
    return head


def _owner_only(path: Path) -> Path:
    """``path`` made empty and owner-only (a plan holds rows of data), not through a link."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600))
    return path


def _not_a_plan(path: Path, why: str) -> InputError:
    return InputError(f"{why} - a plan file is what 'pooler plan POOL -o FILE' writes.", file=str(path),
                      line=1, column=1)


def read_head(path: Path) -> dict[str, Any]:
    """The head of a saved plan; ``InputError`` naming the file when it is none."""
    try:
        with path.open(encoding="utf-8") as f:
            line = f.readline()
    except OSError as exc:
        raise InputError(f"cannot read the plan file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise _not_a_plan(path, "not a plan file (not UTF-8 text)") from None
    try:
        head = json.loads(line)
    except ValueError:
        raise _not_a_plan(path, "not a plan file (its first line is no JSON object)") from None
    if not isinstance(head, dict) or MARK not in head:
        raise _not_a_plan(path, f"not a plan file (its first line has no \"{MARK}\")")
    if head[MARK] != FORMAT:
        raise _not_a_plan(path, f"a plan of format {head[MARK]!r}, and this pooler reads format {FORMAT}")
    lacks = [name for name, kind in HEAD.items() if not isinstance(head.get(name), kind)]
    if lacks:
        raise _not_a_plan(path, f"not a whole plan (its first line lacks {', '.join(lacks)})")
    return head


def read_calls(path: Path) -> Iterator[PlannedCall]:
    """The calls of a saved plan, one line at a time."""
    with path.open(encoding="utf-8") as f:
        next(f, None)
        for line in f:
            yield json.loads(line)


def calls_digest(path: Path) -> str:
    """The sha256 of the plan's call lines, as its head keeps it: a file edited after the plan was
    written is told from one that was not."""
    sha = hashlib.sha256()
    with path.open("rb") as f:
        f.readline()
        while block := f.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def make_head(compiled: Plan, *, task: str, pool: str, store: str | None, options: Mapping[str, Any],
              digests: list[Digest], redactor: Redactor) -> dict[str, Any]:
    """The head of a plan, before its calls are counted: ``pool`` as the command named it,
    ``options`` the batch options the command line gave (``apply`` gives them again)."""
    variables = compiled.variables
    secret = set(variables.secret_names) if variables else set()
    secret.update(n for n, v in compiled.pool.variables.items() if v.secret)
    values = values_of(variables)
    return {MARK: FORMAT, "pooler": __version__, "planned": now_text(), "task": task, "pool": pool,
            "description": compiled.pool.description, "store": store, "sample": compiled.sample,
            "options": dict(options), "base": str(compiled.pool.data_folder()),
            "variables": {n: v for n, v in values.items() if n not in secret},
            "secrets": sorted(n for n in values if n in secret), "digests": digests,
            # What ``run --dry-run --json`` tells of the same pool: one plan, however it is asked for.
            "plan": redactor.value({k: v for k, v in build_plan(compiled).items() if k != "dry_run"}),
            # The compiled pool (pool_source and params_source read in), as a task keeps it.
            "document": redactor.value(compiled.pool.document)}


def applied_already(journal: TaskJournal, task: str, plan: str) -> JournalError:
    """The refusal of a plan applied before: what became of it, and where to go from there."""
    row = journal.task(task)
    when = f" at {row.started}" if row is not None else ""
    return JournalError(f"{plan} was applied{when} as task {task}: pooler redrive {task} sends again what "
                        f"did not land, pooler show {task} tells its answer - a plan applies once; nothing "
                        "was sent.")
