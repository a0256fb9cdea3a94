"""``pooler run --dry-run``: the plan, resolved as far as it can be without the store."""

from __future__ import annotations

import argparse
import math
from collections import ChainMap
from pathlib import Path
from typing import Any

from rich.table import Table

from pooler.cli.commands.common import Context
from pooler.cli.render import console_for
from pooler.errors import PoolerError
from pooler.exits import ExitStatus
from pooler.plural import plural
from pooler.pool.compiler import Plan
from pooler.pool.model import Pool, Step
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
        "variables": {name: {"value": MASK if name in secrets else value,
                             "description": described(pool, name), "secret": name in secrets}
                      for name, value in values.items()},
        "calls": total,
        "steps": steps,
    }


def described(pool: Pool, name: str) -> str:
    var = pool.variables.get(name)
    return var.description if var else ""


def order_text(plan: dict[str, Any]) -> str:
    if plan["mode"] == "sequential":
        text = "sequential: one call at a time, in step order"
    else:
        text = (f"parallel: up to {plan['max_concurrency']} calls at once; a step waits only for the "
                "steps it refers to")
        if plan["serialize_on"]:
            text += f"; calls with equal params.{plan['serialize_on']} go one at a time"
    stop = "stops at the first failure" if plan["stop_on_error"] else "goes on after a failure"
    return f"{text}; {stop}"


def step_cells(entry: dict[str, Any]) -> list[str]:
    rows = entry.get("rows")
    if rows is None:
        data = ""
    else:
        data = ("? rows" if rows["count"] is None else plural(rows["count"], "row")) + f" of {rows['source']}"
        if rows.get("chunk"):
            data += f", {rows['chunk']} a call as {rows['field']}"
        if rows.get("problem"):
            data += f" ({rows['problem']})"
    key = entry.get("key")
    if key is None:
        key_text = ""
    elif key["per_row"]:
        key_text = f"{key['template']} (first: {key.get('first')})"
    else:
        key_text = str(key.get("value") if key.get("value") is not None else key["template"])
    waits = ", ".join(entry["waits_for"])
    if entry.get("after"):
        waits = f"{entry['after']} (order)" + (f"; refs {waits}" if waits else "")
    calls = "?" if entry["calls"] is None else str(entry["calls"])
    return [str(entry["num"]), entry["name"] or "", f"{entry['unit']}.{entry['command']}", calls, data,
            key_text, waits]


COLUMNS = ("#", "name", "unit.command", "calls", "rows", "key", "waits for")


def show_plan(compiled: Plan, args: argparse.Namespace, ctx: Context) -> int:
    """Print the plan (a table on a terminal, plain text otherwise, JSON with ``--json``); exit 0."""
    plan = build_plan(compiled)
    if args.json:
        ctx.emit_json(plan)
        return ExitStatus.OK
    out = ctx.stdout
    calls = "? calls" if plan["calls"] is None else plural(plan["calls"], "call")
    head = [f"dry run of {plan['pool']}: {calls}, nothing is sent",
            f"order: {order_text(plan)}"]
    if plan["description"]:
        head.insert(1, f"about: {plan['description']}")
    variables_rows = [(n, str(v["value"]), v["description"]) for n, v in plan["variables"].items()]
    if out.isatty():
        console = console_for(out)
        for line in head:
            console.print(ctx.redactor.text(line), markup=False)
        if variables_rows:
            vt = Table(title="variables", title_justify="left")
            for column in ("name", "value", "description"):
                vt.add_column(column, overflow="fold")
            for cells in variables_rows:
                vt.add_row(*(ctx.redactor.text(c) for c in cells))
            console.print(vt)
        st = Table(title="steps", title_justify="left")
        for column in COLUMNS:
            st.add_column(column, overflow="fold")
        for entry in plan["steps"]:
            st.add_row(*(ctx.redactor.text(c) for c in step_cells(entry)))
        console.print(st)
        return ExitStatus.OK
    lines = list(head)
    if variables_rows:
        lines.append("variables:")
        lines.extend(f"  {n} = {v}" + (f"  ({d})" if d else "") for n, v, d in variables_rows)
    lines.append("steps:")
    for entry in plan["steps"]:
        step = step_cells(entry)
        calls_text = "? calls" if entry["calls"] is None else plural(entry["calls"], "call")
        text = f"  {step[0]}. {step[1] or '-'} {step[2]}: {calls_text}"
        for label, cell in zip(COLUMNS[4:], step[4:], strict=True):
            if cell:
                # The rows cell says "rows" itself ("30,000 rows of prices.csv").
                text += f"; {cell}" if label == "rows" else f"; {label} {cell}"
        lines.append(text)
    out.write(ctx.redactor.text("\n".join(lines)) + "\n")
    return ExitStatus.OK
