"""``pooler run --dry-run``: the plan, resolved as far as it can be without the store."""

from __future__ import annotations

import argparse
import json
from contextlib import closing
from typing import TYPE_CHECKING, Any

from pooler.cli.commands.common import Context, make_client
from pooler.exits import ExitStatus
from pooler.plural import plural
from pooler.pool.breaker import DEFAULT_BREAKER, BreakerRule
from pooler.pool.budget import planned_line
from pooler.pool.compiler import Plan
from pooler.pool.model import DEFAULT_BUSY_FOR
from pooler.pool.plan_document import build_plan
from pooler.pool.rate import Rate, rate_line

if TYPE_CHECKING:
    from pooler.run.compare import Classified


def order_text(plan: dict[str, Any]) -> str:
    if plan["mode"] == "sequential":
        text = "sequential: one call at a time, in step order"
    else:
        text = (f"parallel: up to {plan['max_concurrency']} calls at once; a step waits only for the "
                "steps it refers to")
        if plan["serialize_on"]:
            text += f"; calls with equal params.{plan['serialize_on']} go one at a time"
    stop = "stops at the first failure" if plan["stop_on_error"] else "goes on after a failure"
    if plan.get("tolerate"):
        stop = f"{stop} that no budget counts; " + "; ".join(planned_line(r) for r in plan["tolerate"])
    return f"{text}; {stop}"


def planned_rate(entry: dict[str, Any]) -> str:
    """A bucket of the plan document as words."""
    rate = Rate(entry["per_second"], entry["burst"], entry.get("key"))
    return rate_line(entry["bucket"], entry["steps"], rate)


def flow_lines(plan: dict[str, Any]) -> list[str]:
    """The plan's adaptive width and its breaker, where they are not the defaults."""
    lines = []
    if plan["adaptive"]:
        lines.append(f"width: adapts to the store, from 2 up to {plan['max_concurrency']} calls at once")
    breaker = plan["breaker"]
    if breaker is None:
        lines.append("breaker: off - a store that goes down costs every call left as a failure")
    elif BreakerRule(**breaker) != DEFAULT_BREAKER:
        lines.append(f"breaker: {BreakerRule(**breaker).text()}")
    lines.extend(busy_line(entry) for entry in plan.get("busy", ())
                 if entry.get("busy_for", DEFAULT_BUSY_FOR) != DEFAULT_BUSY_FOR or "refusals" in entry)
    return lines


def busy_line(entry: dict[str, Any]) -> str:
    """A step's (or steps') way with a busy store, as words."""
    steps = ", ".join(str(n) for n in entry["steps"])
    which = f"step{'s' if len(entry['steps']) > 1 else ''} {steps}"
    if "refusals" in entry:
        told = ", ".join(json.dumps(r, ensure_ascii=False) for r in entry["refusals"])
        return (f"busy refusals: {which} sends a call refused {told} again, under the next key round, "
                f"within {plural(entry['attempts'], 'attempt')}")
    return (f"busy answers: {which} sends a call answered busy again for up to {entry['busy_for']:g} s "
            "(retry busy_for), then leaves it not run and stops the pool")


def compare_text(counts: dict[str, int]) -> str:
    """A compare's counts as words."""
    return (f"compare: {counts['new']:,} new, {counts['changed']:,} changed, "
            f"{counts['unchanged']:,} unchanged (not sent)")


def read_compares(compiled: Plan, args: argparse.Namespace, ctx: Context) -> dict[int, Classified]:
    """The store's rows read for every step with a compare, and its rows classified (matched in the
    journal, as a run matches them); nothing is sent.  A pool without a compare reads nothing."""
    if not any(step.compare is not None for step in compiled.pool.steps):
        return {}
    # Imported here: the client (urllib3) and the journal are loaded only by a dry run that reads
    # the store.
    from pooler.journal.api import journal_spec  # noqa: PLC0415
    from pooler.journal.opening import open_journal  # noqa: PLC0415
    from pooler.run.compare import compare_steps  # noqa: PLC0415

    assert compiled.variables is not None
    spec = journal_spec(args.journal, ctx.environ)
    with make_client(args, ctx, masking=False, need_token=True) as client, \
            closing(open_journal(spec)) as journal:
        return compare_steps(journal.compare_rows(), client, compiled.pool, compiled.variables.values,
                             scope="dry-run")


def step_cells(entry: dict[str, Any]) -> list[str]:
    rows = entry.get("rows")
    if rows is None:
        data = ""
    else:
        data = ("? rows" if rows["count"] is None else plural(rows["count"], "row")) + f" of {rows['source']}"
        if rows.get("chunk"):
            data += f", {rows['chunk']} a call as {rows['field']}"
            if rows.get("row") is not None:
                data += f", each row {json.dumps(rows['row'], ensure_ascii=False)}"
        if rows.get("problem"):
            data += f" ({rows['problem']})"
        if entry.get("compare"):
            data += f"; {compare_text(entry['compare'])}"
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
    # Imported here: pooler check tells compares and rates with this module's words, and needs
    # neither the journal a store's rate is kept in nor the terminal's drawing.
    from pooler.cli.commands.store_rate import store_rate  # noqa: PLC0415
    from pooler.cli.render import console_for  # noqa: PLC0415

    plan = build_plan(compiled)
    compared = read_compares(compiled, args, ctx)
    if compared:
        from pooler.run.compare import with_compares  # noqa: PLC0415

        with_compares(plan, compiled, compared)
    if args.json:
        ctx.emit_json(plan)
        return ExitStatus.OK
    out = ctx.stdout
    calls = "? calls" if plan["calls"] is None else plural(plan["calls"], "call")
    head = [f"dry run of {plan['pool']}: {calls}, nothing is sent",
            f"order: {order_text(plan)}"]
    if plan["rate"]:
        head.append("rate: " + "; ".join(planned_rate(r) for r in plan["rate"]))
    limit = store_rate(args, ctx, "")
    if limit is not None:
        head.append(f"store rate: the store starts {limit.rate.text()}, for every task that calls it "
                    "together, each with a fair share")
    head.extend(flow_lines(plan))
    if plan["description"]:
        head.insert(1, f"about: {plan['description']}")
    variables_rows = [(n, str(v["value"]), v["description"]) for n, v in plan["variables"].items()]
    if out.isatty():
        # Loaded only here: pooler check, which tells compares and rates with this module's words,
        # and a plan written to a pipe print text without rich.
        from rich.table import Table  # noqa: PLC0415

        console = console_for(out, environ=ctx.environ)
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
