"""The arguments of a ``pool_run`` call read into the pool file's checked plan: what a run, a dry
run, a plan and a plan's commit all begin with."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pooler.errors import InputError
from pooler.mcp.arguments import check_names, check_task, confine, optional
from pooler.pool.compiler import Inputs, Plan, plan_for_run
from pooler.pool.loader import load_pool
from pooler.pool.rows import json_kind

if TYPE_CHECKING:
    from pooler.mcp.tool_pool import PoolRuns

TOOL = "pool_run"


def _vars(arguments: Mapping[str, Any]) -> dict[str, str]:
    """``vars`` as ``--var`` gives them: text; a number or true/false as its JSON text."""
    given = optional(arguments, "vars", dict, TOOL) or {}
    values: dict[str, str] = {}
    for name, value in given.items():
        if isinstance(value, str):
            values[name] = value
        elif isinstance(value, (bool, int, float)):
            values[name] = json.dumps(value)
        else:
            raise InputError(f"vars.{name} of {TOOL} is {json_kind(value)} - give a variable's value as "
                             "text, a string.")
    return values


def load(runs: PoolRuns, arguments: Mapping[str, Any], session_task: str, *,
         tools: list[dict[str, Any]] | None = None) -> tuple[Plan, str, bool]:
    """The checked plan, its (session) task, and whether it is a dry run; every refusal that comes
    before the first call.  ``tools``: a plan (``plan: true``), its data files read and the pool
    checked against the store's declarations as well, as ``pooler plan`` does."""
    check_names(TOOL, arguments)
    arguments = {k: v for k, v in arguments.items() if k not in ("plan", "plan_id")}
    file = optional(arguments, "file", str, TOOL)
    if file is None or not file.strip():
        raise InputError(f"file is required - the pool file to run, a path in the store folder {runs.out} "
                         "or an absolute path, for example pools/prices.yaml.")
    confine(file, runs.out, "file")
    named = optional(arguments, "task", str, TOOL)
    task = check_task(named, session_task) if named is not None else session_task
    sample = optional(arguments, "sample", int, TOOL)
    if sample is not None and sample < 1:
        raise InputError(f"sample of {TOOL} is a number of rows, 1 or more, not {sample}.")
    dry_run = bool(optional(arguments, "dry_run", bool, TOOL))
    path = Path(file) if Path(file).is_absolute() else runs.out / file
    pool = load_pool(path, partial=True)
    inputs = Inputs(overrides=_vars(arguments), environ=runs.environ)
    # As `pooler run`: a dry run (and a plan) reads the data files here, a run as its task is planned.
    plan = plan_for_run(pool, inputs, sample=sample, data_files=dry_run or tools is not None, tools=tools)
    assert plan.variables is not None
    for secret in plan.variables.secrets:
        runs.redactor.add(secret)
    return plan, task, dry_run
