"""The plan as a document: what ``pooler run --dry-run`` shows and MCP's ``tool_pool {"plan": true}``
returns, resolved as far as it can be without the store (secrets as ***)."""

from __future__ import annotations

import math
from collections import ChainMap
from pathlib import Path
from typing import Any

from pooler.errors import PoolerError
from pooler.pool.compiler import Plan
from pooler.pool.model import Pool, Step
from pooler.pool.rate import buckets
from pooler.pool.references import find_refs
from pooler.pool.variables import placeholders, substitute
from pooler.redact import MASK


def first_row(plan: Plan, step: Step) -> tuple[int | None, dict[str, Any] | None]:
    """Rows of a step's data file (as the compile step read it) and its first row."""
    data = plan.data.get(step.num)
    if data is None:
        return None, None
    return data.rows, data.first


def key_plan(step: Step, scope: dict[str, Any], row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The key as it will be sent: resolved, or per row its template and the first row's value."""
    if step.key is None:
        return None
    per_row = any(name.split(".", 1)[0] == "row" for _, name in placeholders(step.key))
    found: dict[str, Any] = {"template": step.key, "per_row": per_row}
    full: Any = ChainMap({"row": row}, scope) if row is not None else scope
    try:
        value = substitute(step.key, full)
    except PoolerError as exc:
        found["value"] = None
        found["note"] = exc.message
        return found
    found["value" if not per_row else "first"] = value
    return found


def build_plan(plan: Plan) -> dict[str, Any]:
    """The plan as a JSON-ready dict: options, variables (secrets as ***), steps, rows, keys, waits."""
    pool, variables, sample = plan.pool, plan.variables, plan.sample
    values: dict[str, Any] = dict(variables.values) if variables else {}
    secrets = set(variables.secret_names) if variables else set()
    secrets.update(n for n, var in pool.variables.items() if var.secret)
    opts = pool.options
    steps: list[dict[str, Any]] = []
    earlier: dict[str, Step] = {}
    total: int | None = 0
    previous: Step | None = None
    for step in pool.steps:
        fe = step.for_each
        waits = sorted({earlier[r.key].label for r in find_refs(step.params) if r.key in earlier})
        if fe is not None and fe.step and fe.step.lower() in earlier:
            waits = sorted({*waits, earlier[fe.step.lower()].label})
        rows, row = first_row(plan, step)
        if rows is not None and sample is not None:
            rows = min(rows, sample)
        if fe is None:
            calls: int | None = 1
        elif rows is None:
            calls = None
        else:
            calls = math.ceil(rows / fe.chunk) if fe.chunk else rows
        total = None if total is None or calls is None else total + calls
        entry: dict[str, Any] = {
            "num": step.num, "name": step.name, "unit": step.unit, "command": step.command,
            "description": step.description, "calls": calls, "waits_for": waits,
            "after": previous.label if opts.mode == "sequential" and previous is not None else None,
        }
        if fe is not None:
            source = fe.file or f"table {fe.table or '?'} of step {fe.step}"
            data = plan.data.get(step.num)
            if data is not None:
                source = str(fe.file) if data.path.name == Path(str(fe.file)).name else str(data.path)
            entry["rows"] = {"source": source, "count": rows, "chunk": fe.chunk, "field": fe.field}
            if step.chunk_row is not None:
                entry["rows"]["row"] = step.chunk_row
        key = key_plan(step, values, row)
        if key is not None:
            entry["key"] = key
        if step.into:
            entry["into"] = step.into
        steps.append(entry)
        if step.name:
            earlier[step.name.lower()] = step
        previous = step
    return {
        "dry_run": True,
        "pool": pool.file,
        "description": pool.description,
        "mode": opts.mode,
        "max_concurrency": opts.max_concurrency if opts.mode == "parallel" else 1,
        "serialize_on": opts.serialize_on,
        "stop_on_error": opts.stop_on_error,
        "include_results": opts.include_results,
        "adaptive": opts.adaptive and opts.mode == "parallel",
        "breaker": None if pool.breaker is None else pool.breaker.doc(),
        "busy": busy_plan(pool),
        "variables": {name: {"value": MASK if name in secrets else value,
                             "description": described(pool, name), "secret": name in secrets}
                      for name, value in values.items()},
        "calls": total,
        "tolerate": planned_budgets(pool, {e["num"]: e["calls"] for e in steps}),
        "rate": [{"steps": nums, "bucket": pace.bucket, **pace.rate.doc()}
                 for pace, nums in buckets(pool.paces())],
        "steps": steps,
    }


def busy_plan(pool: Pool) -> list[dict[str, Any]]:
    """What the steps do with a busy store: how long a call answered busy is sent again (the
    steps of each patience together), and the refusals each step takes for busy."""
    patience: dict[float, list[int]] = {}
    for step in pool.steps:
        patience.setdefault(pool.patience(step), []).append(step.num)
    found: list[dict[str, Any]] = [{"steps": nums, "busy_for": seconds} for seconds, nums in patience.items()]
    for step in pool.steps:
        if step.retry is not None and step.retry.refusals:
            found.append({"steps": [step.num], "refusals": list(step.retry.refusals),
                          "attempts": step.retry.attempts})
    return found


def planned_budgets(pool: Pool, calls: dict[int, int | None]) -> list[dict[str, Any]]:
    """The pool's error budgets in calls, of the calls planned (``allowed`` None where a step's
    calls are not known before the run: a step over an earlier step's table)."""
    out = []
    for budget in pool.budgets().all:
        known = [calls.get(n) for n in budget.steps]
        planned = None if any(c is None for c in known) else sum(c or 0 for c in known)
        allowed = None if planned is None and budget.allow.calls is None else budget.allow.of(planned or 0)
        out.append({"kind": budget.kind, "step": budget.step, "tolerate": budget.allow.value,
                    "allowed": allowed, "planned": planned})
    return out


def described(pool: Pool, name: str) -> str:
    var = pool.variables.get(name)
    return var.description if var else ""
