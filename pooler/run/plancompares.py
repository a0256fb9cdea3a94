"""A saved plan's steps with ``compare:``, as ``pooler plan``/``pooler apply`` and the MCP server's
``pool_run`` plan and commit read them alike.

Making a plan reads each compare now and keeps, with every call, what the store held of its rows;
applying it reads the compares again: a planned call whose rows moved since is a conflict (not
sent, listed), the others are sent from the plan's own classes, so the task makes exactly the
plan's calls.  How the store and the journal are reached is the caller's (a ``Reader``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.journal.documents import Conflict
from pooler.pool.compiler import Plan
from pooler.pool.model import Step
from pooler.redact import Redactor
from pooler.run.compare import Classified
from pooler.run.conflicts import beyond_sample, conflicts, from_plan, moved_rows, planned_columns
from pooler.run.savedplan import Classify, PlannedCall, read_calls, write_plan

#: Each step's compare read now, and what ``then`` reads of the store with it; ``({}, None)`` for a
#: pool without one.
Reader = Callable[[Callable[[ToolRunClient, dict[int, Classified]], Any]], tuple[dict[int, Classified], Any]]


def classify(compared: Mapping[int, Classified]) -> Classify | None:
    """The class of each planned call of a step with compare: (its rows' classes)."""
    if not compared:
        return None

    def of(step: Step, call: PlannedCall) -> str | None:
        found = compared.get(step.num)
        rows = call.get("rows")
        return None if found is None or not rows else str(found.call_class(list(rows)))

    return of


def save_plan(path: Path, head: dict[str, Any], compiled: Plan, redactor: Redactor, read: Reader
              ) -> dict[str, Any]:
    """Write the plan to ``path`` with its compares read now (each call's rows' classes, and what
    the store holds of its changed rows); its head."""
    values = compiled.variables.values if compiled.variables else {}
    compared, stored = read(lambda client, found: planned_columns(client, compiled.pool, values, found))
    return write_plan(path, head, compiled, redactor, classify(compared), compared=compared,
                      stored=stored or {})


def apply_compares(path: Path, head: Mapping[str, Any], compiled: Plan, redactor: Redactor, read: Reader, *,
                   refresh: bool = False) -> tuple[dict[int, Classified] | None, list[Conflict]]:
    """What the task applying the plan at ``path`` is planned from (its steps' classes as planned;
    ``refresh``: as the store is now), and its conflicts, masked: the planned calls whose rows
    moved in the store since the plan."""
    values = compiled.variables.values if compiled.variables else {}
    planned, was = from_plan(read_calls(path), head["steps"])
    current, moved = read(lambda client, found: (
        {} if refresh else moved_rows(client, compiled.pool, values, planned=planned, was=was, now=found)))
    # What moved names the store's values and the rows': masked as everything the journal keeps.
    found_conflicts: list[Conflict] = redactor.value(conflicts(read_calls(path), moved or {}))
    if head.get("sample") is not None:
        beyond_sample(planned, current, int(head["sample"]))
    if refresh:
        return current or None, []
    return planned or None, found_conflicts
