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
from typing import TYPE_CHECKING, Any

from pooler.contract.fieldtypes import CastError, cast
from pooler.errors import PoolerError, Problem
from pooler.plural import plural
from pooler.pool.model import Step
from pooler.pool.paramplan import ParamsPlan, plan_chunk_row, plan_params
from pooler.pool.variables import placeholders

if TYPE_CHECKING:
    from pooler.pool.against import Declared

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
    #: Fills the checked fields from a row: the step's params, or a chunk's row shape (None: a
    #: chunk's row goes as it is).
    plan: ParamsPlan | None
    #: The chunk field whose every row is checked (None: the params are).
    chunk_field: str | None = None
    #: Of ``fields``, those a row must give (a chunk's declared row fields).
    required: frozenset[str] = frozenset()
    problems: list[Problem] = field(default_factory=list)
    more: int = 0
    #: The line of the first row not named, where the count of the rest points.
    next_line: int | None = None

    @classmethod
    def of(cls, step: Step, path: Path, declared: Declared | None,
           header: tuple[str, ...] | None) -> RowTypes | None:
        """The checks for ``step``, or None when none of its declared fields is filled from a row."""
        if declared is None or step.for_each is None:
            return None
        if step.for_each.chunk is not None:
            return cls._of_chunk(step, path, declared, header)
        fields = {name: declared.types[name] for name, value in step.params.items()
                  if name in declared.types and any(n.startswith("row.") for _, n in placeholders(value))}
        if not fields:
            return None
        return cls(step, path, declared.command, fields, header, plan_params(step.params, (), step))

    @classmethod
    def _of_chunk(cls, step: Step, path: Path, declared: Declared,
                  header: tuple[str, ...] | None) -> RowTypes | None:
        """Every row of a chunk, as its shape makes it, against the declared fields of a row."""
        if declared.rows is None or step.for_each is None:
            return None
        fields = {str(r["name"]): str(r.get("type", "")) for r in declared.rows}
        required = frozenset(str(r["name"]) for r in declared.rows if r.get("required"))
        if step.chunk_row is not None:
            fields = {k: v for k, v in fields.items() if k in step.chunk_row}
        return cls(step, path, declared.command, fields, header, plan_chunk_row(step),
                   chunk_field=step.for_each.field, required=required)

    def check(self, row: dict[str, Any], scope: dict[str, Any], line: int | None, number: int) -> None:
        """One row (``number`` counts from 1; ``line`` is where it starts in the file, if known)."""
        scope["row"] = row
        try:
            params = self.plan.fill(scope, {}) if self.plan is not None else row
        except PoolerError:
            return  # a field the row lacks is told by the row checks
        for name, kind in self.fields.items():
            value = params.get(name) if isinstance(params, dict) else None
            if name in self.required and value in (None, ""):
                self._tell(name, "is required, and this row gives it " + ("empty" if value == "" else "none"),
                           line, number)
                return
            if self.chunk_field is not None and value is None:
                continue  # a row field not required may be left out
            try:
                cast(kind, value)
            except CastError as exc:
                self._tell(name, f"takes {kind}: {exc}", line, number)
                return

    def _tell(self, name: str, why: str, line: int | None, number: int) -> None:
        if len(self.problems) >= MAX_TYPE_PROBLEMS:
            self.more += 1
            self.next_line = self.next_line or line
        else:
            self.problems.append(self._problem(name, why, line, number))

    def _problem(self, name: str, why: str, line: int | None, number: int) -> Problem:
        shape = self.step.params if self.chunk_field is None else self.step.chunk_row
        if shape is None:
            columns = [name]  # a chunk's row as the file holds it: the column is the field
        else:
            columns = [n.split(".", 1)[1] for _, n in placeholders(shape[name]) if n.startswith("row.")]
        shown = ", ".join(self._column(c) for c in dict.fromkeys(columns))
        # The data file and line are the problem's place (``file:line: ``); a JSON row has no line.
        where = "" if line is not None else f"row {number}, "
        step = f"step {self.step.num}" + (f" {self.step.name}" if self.step.name else "")
        of = f"of each row of [{self.chunk_field}] of" if self.chunk_field is not None else "of"
        return Problem(f"{where}column {shown}: the field [{name}] {of} {self.command} {why} - "
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
