"""``pooler show FILE``: a saved plan's summary - per step its calls and, with ``compare:``, how many
are new, changed and unchanged - as lines, JSON (``--json``) or Markdown fit for a pull request's
comment (``--markdown``).  A stale plan is shown too, with a warning that says what is stale."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from pooler.cli.commands.common import Context
from pooler.cli.commands.dry_run import flow_lines, order_text, planned_rate
from pooler.cli.commands.plan_common import digests_now
from pooler.errors import PoolerError
from pooler.exits import ExitStatus
from pooler.plural import plural
from pooler.run.plandigests import label, stale
from pooler.run.savedplan import CLASSES, classes_text, read_head


def _calls(count: int | None) -> str:
    return "? calls" if count is None else plural(count, "call")


def head_line(file: str, head: dict[str, Any]) -> str:
    against = f" against {head['store']}" if head.get("store") else ""
    return (f"plan {file} of {head['pool']}: {_calls(head.get('calls'))}, planned {head['planned']}{against} "
            f"as task {head['task']}; nothing is sent until it is applied")


def stale_warning(told: list[str]) -> str:
    return f"pooler: WARNING: the plan is stale, and 'pooler apply' refuses it: {'; '.join(told)}"


def plan_lines(file: str, head: dict[str, Any]) -> list[str]:
    lines = [head_line(file, head)]
    plan = head.get("plan")
    if isinstance(plan, dict):
        # As ``run --dry-run`` tells them: the same plan.
        lines.append(f"order: {order_text(plan)}")
        if plan.get("rate"):
            lines.append("rate: " + "; ".join(planned_rate(r) for r in plan["rate"]))
        lines.extend(flow_lines(plan))
    if head.get("sample") is not None:
        lines.append(f"sample: the first {plural(head['sample'], 'row')} of each data file")
    lines.append("steps:")
    for entry in head.get("steps") or []:
        text = (f"  {entry['num']}. {entry.get('name') or '-'} {entry['unit']}.{entry['command']}: "
                f"{_calls(entry.get('calls'))}")
        classes = classes_text(entry.get("compare") if isinstance(entry.get("compare"), dict) else None)
        lines.append(text + (f" ({classes})" if classes else ""))
    if head.get("secrets"):
        lines.append(f"secrets to give again at apply: {', '.join(head['secrets'])}")
    lines.append(f"apply it once with: pooler apply {file}")
    return lines


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(file: str, head: dict[str, Any], told: list[str]) -> str:
    """The plan as a pull request's comment: a heading, the warning, a table of its steps, the
    secrets to give again and the digests it was made from."""
    out = [f"### pooler plan `{_cell(head['pool'])}`", ""]
    if told:
        out += [f"> **Stale:** `pooler apply` refuses this plan: {_cell('; '.join(told))}.", ""]
    against = f" against `{_cell(head['store'])}`" if head.get("store") else ""
    out += [(f"{_calls(head.get('calls'))}, planned {head['planned']}{against} as task `{head['task']}`. "
             "Nothing is sent until it is applied."), ""]
    compared = any(isinstance(e.get("compare"), dict) for e in head.get("steps") or [])
    columns = ["#", "step", "unit.command", "calls", *(CLASSES if compared else ())]
    out += ["| " + " | ".join(columns) + " |",
            "|" + "|".join("---:" if c in ("#", "calls", *CLASSES) else "---" for c in columns) + "|"]
    for entry in head.get("steps") or []:
        counts = entry.get("compare") if isinstance(entry.get("compare"), dict) else None
        cells = [entry["num"], _cell(entry.get("name") or "-"), f"{entry['unit']}.{entry['command']}",
                 "?" if entry.get("calls") is None else f"{entry['calls']:,}"]
        if compared:
            cells += [f"{counts.get(c, 0):,}" if counts else "" for c in CLASSES]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    out.append("")
    if head.get("secrets"):
        out += [f"Secrets to give again at apply: {', '.join(f'`{s}`' for s in head['secrets'])}.", ""]
    out += ["<details><summary>What it was planned from (sha256)</summary>", ""]
    out += [f"- {_cell(label(d))}: `{d['sha256'][:12]}`" for d in head.get("digests") or []]
    out += ["", "</details>", "", f"Apply it once with `pooler apply {_cell(file)}`."]
    return "\n".join(out) + "\n"


def print_plan(ctx: Context, file: str, head: dict[str, Any], told: list[str], *, out: TextIO) -> None:
    if told:
        ctx.note(stale_warning(told))
    out.write(ctx.redactor.text("\n".join(plan_lines(file, head))) + "\n")


def what_is_stale(head: dict[str, Any], args: argparse.Namespace, ctx: Context) -> list[str]:
    """What changed since the plan, from the files here (the store is not asked)."""
    try:
        now, _ = digests_now(head, args, ctx, tools=None, stand_in=True)
    except PoolerError as error:
        # A pool that no longer compiles (a variable now missing, a file unreadable) is stale too.
        return [f"the pool cannot be read as planned: {error.message}"]
    return stale(head["digests"], now)


def show_plan(args: argparse.Namespace, ctx: Context, path: Path) -> int:
    """``pooler show FILE``; exit 0 for a plan that is stale too (the warning tells it)."""
    head = read_head(path)
    args.var, args.vars_file = getattr(args, "var", None) or [], getattr(args, "vars_file", None)
    told = what_is_stale(head, args, ctx)
    file = str(path)
    if args.json:
        if told:
            ctx.note(stale_warning(told))
        ctx.emit_json({**head, "file": file, "stale": told})
    elif args.markdown:
        ctx.stdout.write(ctx.redactor.text(markdown(file, head, told)))
    else:
        print_plan(ctx, file, head, told, out=ctx.stdout)
    return ExitStatus.OK
