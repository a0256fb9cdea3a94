"""What ``pooler apply`` and ``pooler show FILE`` read of a saved plan alike: the command it was made
with (its pool, options, sample and task), its variables, and its digests as the files are now."""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from pooler.cli.commands.common import Context, parse_var, variable_inputs
from pooler.cli.commands.run import OVERRIDES, apply_overrides
from pooler.pool.compiler import Inputs
from pooler.pool.loader import load_pool, load_pool_value
from pooler.pool.model import Pool
from pooler.pool.variables import resolve_variables
from pooler.redact import MASK
from pooler.run.plandigests import MISSING, POOL, Digest, plan_digests
from pooler.run.planfiles import digest


def quiet(ctx: Context) -> Context:
    """``ctx`` with its notes dropped: the plan told them when it was made."""
    return replace(ctx, stderr=io.StringIO())


def plan_args(head: dict[str, Any], args: argparse.Namespace) -> argparse.Namespace:
    """``args`` set as the plan's command set them: its pool, options, sample and task."""
    args.pool, args.sample, args.task = head["pool"], head.get("sample"), head["task"]
    options = head.get("options") or {}
    for name in (*OVERRIDES, "rate"):
        setattr(args, name, options.get(name))
    return args


def plan_inputs(head: dict[str, Any], args: argparse.Namespace, ctx: Context, *,
                stand_in: bool = False) -> Inputs:
    """The variables' sources as ``run`` takes them, with the plan's values for those that are no
    secret and that ``--var`` does not give again (a value given again is compared with the plan's).
    ``stand_in``: the secrets not given stand in as ``***`` (``show`` digests no secret, and sends
    nothing)."""
    given = variable_inputs(args, ctx)
    named = {parse_var(text)[0] for text in args.var}
    values = head.get("variables") or {}
    planned = {name: json.dumps(value, ensure_ascii=False) for name, value in values.items()
               if name not in named and not isinstance(value, dict | list)}
    if stand_in:
        planned.update((name, MASK) for name in head.get("secrets") or () if name not in named)
    return replace(given, overrides={**planned, **given.overrides})


def digests_now(head: dict[str, Any], args: argparse.Namespace, ctx: Context, *,
                tools: list[dict[str, Any]] | None, stand_in: bool = False
                ) -> tuple[list[Digest], Pool | None]:
    """What the plan's digests are now, from the files as they are: the pool file alone when it
    changed or is gone (its steps are then no longer the plan's), else everything.  ``stand_in``:
    as ``plan_inputs``."""
    then = {d["name"]: d for d in head["digests"] if d["what"] == POOL}
    path = Path(head["pool"])
    if not then and isinstance(head.get("document"), dict):
        # A plan of a pool that is no file (the MCP server's): the pool as the plan keeps it.
        pool = load_pool_value(head["document"], file=head["pool"], base=Path(head.get("base") or "."),
                               partial=True)
        return plan_digests(pool, {}, tools=tools), pool
    if not path.is_file() or any(digest(path) != d["sha256"] for d in then.values()):
        # The rest is told against the plan's own steps, which are no longer these: the file alone.
        now: Digest = {"what": POOL, "name": head["pool"],
                       "sha256": digest(path) if path.is_file() else MISSING}
        return [now if d["what"] == POOL else d for d in head["digests"]], None
    muted = quiet(ctx)
    pool = apply_overrides(load_pool(path, partial=True), plan_args(head, args), muted)
    inputs = plan_inputs(head, args, ctx, stand_in=stand_in)
    values = resolve_variables(pool, inputs.overrides, inputs.vars_file, inputs.environ)
    return plan_digests(pool, values.values, values.secret_names, tools=tools), pool
