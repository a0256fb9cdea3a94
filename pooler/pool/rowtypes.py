"""A data file's values checked against the declared types of the fields its rows fill.

``check --data --against`` reads every row: each params field whose value holds a ``${row...}`` is
filled as the call would fill it (``for_each.decimal`` included) and cast by the store's own rules
(``contract.fieldtypes``), so a price ``5306,19`` that a ``float`` field refuses is told at its line
of the data file, not at the store's refusal of the first call.  A problem names the data file, the
line the row starts on (CSV, JSONL; a JSON file's row by its number in the list), the column (a CSV
column by its header name and 1-based position; a JSON field by its name) and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pooler.contract.fieldtypes import CastError, cast
from pooler.errors import PoolerError, Problem
from pooler.plural import plural
from pooler.pool.model import Step
from pooler.pool.paramplan import ParamsPlan, plan_params
from pooler.pool.variables import placeholders

#: Rows a step's type problems name at most; the rest are counted.
MAX_TYPE_PROBLEMS = 5


@dataclass
class RowTypes:
    """The checks of one step's rows against its command's declared field types."""

    step: Step
    path: Path
    command: str
    #: The declared fields this step fills from a row, with their types.
    fields: dict[str, str]
    #: The CSV header (for a column's position), or None.
    header: tuple[str, ...] | None
    plan: ParamsPlan
    problems: list[Problem] = field(default_factory=list)
    more: int = 0
    #: The line of the first row not named, where the count of the rest points.
    next_line: int | None = None

    @classmethod
    def of(cls, step: Step, path: Path, declared: tuple[str, dict[str, str]] | None,
           header: tuple[str, ...] | None) -> RowTypes | None:
        """The checks for ``step``, or None when none of its declared fields is filled from a row."""
        if declared is None or step.for_each is None or step.for_each.chunk is not None:
            return None
        command, types = declared
        fields = {name: types[name] for name, value in step.params.items()
                  if name in types and any(n.startswith("row.") for _, n in placeholders(value))}
        if not fields:
            return None
        return cls(step, path, command, fields, header, plan_params(step.params, (), step))

    def check(self, row: dict[str, Any], scope: dict[str, Any], line: int | None, number: int) -> None:
        """One row (``number`` counts from 1; ``line`` is where it starts in the file, if known)."""
        scope["row"] = row
        try:
            params = self.plan.fill(scope, {})
        except PoolerError:
            return  # a field the row lacks is told by the row checks
        for name, kind in self.fields.items():
            try:
                cast(kind, params.get(name))
            except CastError as exc:
                if len(self.problems) >= MAX_TYPE_PROBLEMS:
                    self.more += 1
                    self.next_line = self.next_line or line
                else:
                    self.problems.append(self._problem(name, kind, str(exc), line, number))
                return

    def _problem(self, name: str, kind: str, why: str, line: int | None, number: int) -> Problem:
        columns = [n.split(".", 1)[1] for _, n in placeholders(self.step.params[name])
                   if n.startswith("row.")]
        shown = ", ".join(self._column(c) for c in dict.fromkeys(columns))
        # The data file and line are the problem's place (``file:line: ``); a JSON row has no line.
        where = "" if line is not None else f"row {number}, "
        step = f"step {self.step.num}" + (f" {self.step.name}" if self.step.name else "")
        return Problem(f"{where}column {shown}: the field [{name}] of {self.command} takes {kind}: {why} - "
                       f"{step} would be refused at this row.",
                       file=str(self.path), line=line, step=self.step.num)

    def _column(self, name: str) -> str:
        head = name.split(".", 1)[0]
        if self.header is not None and head in self.header:
            return f"{name} ({self.header.index(head) + 1})"
        return name

    def told(self) -> list[Problem]:
        """The problems found, and a count of the rows beyond them."""
        if not self.more:
            return self.problems
        rest = Problem(f"and {plural(self.more, 'more row')} in {self.path} whose values the field types of "
                       f"{self.command} refuse (step {self.step.num}).", file=str(self.path),
                       line=self.next_line, step=self.step.num)
        return [*self.problems, rest]
