"""Error budgets (``tolerate: {failed: 2%, in_doubt: 3}``): how many calls may fail or end in doubt
while a pool goes on, and the one judgement of a count against them.

A step's budget of a kind counts that step's calls and wins over the pool's; the pool's counts the
calls of the steps without one of their own.  A budget in percent is of the planned calls of what
it counts, rounded down to calls: so a percent under 100 never lets every call it counts fail
(1 % of one call is none), nor every call of one of its steps, and only ``100%`` says that every
call may.  The same judgement stops a
running pool (``over``), sets a run's exit status and fills the answer's ``tolerated``
(``tolerated``): the journal's counts go in, so every runner of a task, and ``pooler show`` later,
judge alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pooler.statuses import TROUBLE, CallStatus

if TYPE_CHECKING:
    from fractions import Fraction

#: The kinds of call a budget counts: the statuses of the calls that did not land, as far as
#: anyone knows (the names of ``tolerate``'s fields, and of ``Counts``').
KINDS: tuple[str, ...] = tuple(s.value for s in TROUBLE)
_PERCENT = re.compile(r"^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)%$")


@dataclass(frozen=True)
class Allowance:
    """A number of calls, or a percent of the planned ones; ``text`` as the file wrote it."""

    text: str
    calls: int | None = None
    #: Exact, as written (``2.5`` of ``2.5%``): a float's 9.999... must not round 10 % of 100 down to 9.
    percent: Fraction | None = None

    @property
    def value(self) -> int | str:
        """As the file wrote it: a number, or the percent's text."""
        return self.calls if self.calls is not None else self.text

    def of(self, planned: int) -> int:
        """The calls allowed of ``planned`` calls: a percent rounds down, so that under 100 % it never
        allows them all: 1 % of a single call allows none."""
        if self.calls is not None:
            return self.calls
        return math.floor((self.percent or 0) * planned / 100)


def allowance(value: Any) -> Allowance | None:
    """The allowance a file's value writes, or None when it writes none (see ``allowance_message``)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return Allowance(str(value), calls=value)
    if isinstance(value, str) and _PERCENT.match(value):
        # Loaded for a budget in percent alone: fractions (and the decimal it loads) weigh on every start.
        from fractions import Fraction  # noqa: PLC0415

        return Allowance(value, percent=Fraction(value[:-1]))
    if isinstance(value, str) and value.isascii() and value.isdigit():
        # As text, as an MCP client sends it (its input schema gives each field one type).
        return Allowance(value, calls=int(value))
    return None


@dataclass(frozen=True)
class Tolerate:
    """A step's or a pool's budgets, by kind (``failed``, ``in_doubt``)."""

    kinds: Mapping[str, Allowance]

    def doc(self) -> dict[str, Any]:
        """As the file wrote it: what a task keeps."""
        return {k: a.value for k, a in self.kinds.items()}


def tolerate_of(value: Any) -> Tolerate | None:
    """The budgets a ``tolerate`` mapping gives (the schema has refused any other)."""
    if not isinstance(value, dict):
        return None
    kinds = {k: a for k in KINDS if (a := allowance(value.get(k))) is not None}
    return Tolerate(kinds) if kinds else None


@dataclass(frozen=True)
class Counts:
    """What the journal holds of one step's calls."""

    planned: int = 0
    failed: int = 0
    in_doubt: int = 0


def counts_of(rows: Iterable[Sequence[Any]]) -> dict[int, Counts]:
    """The journal's rows of counts (step, planned, failed, in doubt), by step."""
    return {int(num): Counts(int(planned), int(failed), int(doubt)) for num, planned, failed, doubt in rows}


#: Why the pool stops, from the journal's counts of its steps' calls; None: it goes on.
Judge = Callable[[Mapping[int, Counts]], str | None]


@dataclass(frozen=True)
class Budget:
    """One budget: the steps it counts, its kind, and what it allows."""

    kind: str
    steps: tuple[int, ...]
    allow: Allowance
    #: ``None`` for the pool's, else the step's number.
    step: int | None

    def judge(self, counts: Mapping[int, Counts]) -> tuple[int, int, int]:
        """The calls of its kind, the calls allowed, and the planned calls it counts."""
        planned = sum(counts[n].planned for n in self.steps if n in counts)
        found = sum(getattr(counts[n], self.kind) for n in self.steps if n in counts)
        return found, self.allow.of(planned), planned

    def whole_step(self, counts: Mapping[int, Counts]) -> int | None:
        """A step it counts of which every planned call is of its kind, when it is a percent under
        100: a share of the calls may fail, never a whole step (the pool's 2 % of 1,001 calls does
        not let the one call of a last step fail)."""
        if self.allow.percent is None or self.allow.percent >= 100:
            return None
        return next((n for n in self.steps
                     if n in counts and 0 < counts[n].planned <= getattr(counts[n], self.kind)), None)

    def over(self, counts: Mapping[int, Counts]) -> bool:
        found, allowed, _ = self.judge(counts)
        return found > allowed or self.whole_step(counts) is not None

    def row(self, counts: Mapping[int, Counts]) -> dict[str, Any]:
        """What the answer's ``tolerated`` says of this budget."""
        found, allowed, planned = self.judge(counts)
        row = {"kind": self.kind, "step": self.step, "tolerate": self.allow.value, "calls": found,
               "allowed": allowed, "planned": planned, "within": found <= allowed}
        # Within the count, but a whole step: the row says which step puts it over.
        whole = self.whole_step(counts) if found <= allowed else None
        return row if whole is None else {**row, "within": False, "every_call_of_step": whole}

    def line(self, counts: Mapping[int, Counts]) -> str:
        return budget_line(self.row(counts))


@dataclass(frozen=True)
class Budgets:
    """Every budget of a pool, and which one counts a step's calls of a kind."""

    all: tuple[Budget, ...]

    def covering(self, num: int, kind: str) -> Budget | None:
        return next((b for b in self.all if b.kind == kind and num in b.steps), None)

    def judge_for(self, num: int, status: str) -> Judge | None:
        """What tells, from the journal's counts once a call of step ``num`` that ended ``status``
        is among them, why it stops the pool (None while the budget holds it); None when no budget
        counts such a call."""
        budget = self.covering(num, str(status)) if status in KINDS else None
        if budget is None:
            return None

        def judge(counts: Mapping[int, Counts]) -> str | None:
            return f"step {num} {status}: {budget.line(counts)}" if budget.over(counts) else None

        return judge

    def tolerated(self, counts: Mapping[int, Counts]) -> dict[str, Any]:
        """The answer's ``tolerated``: the calls counted, whether every failed or in-doubt call is
        within a budget, and each budget's count."""
        rows = [b.row(counts) for b in self.all]
        uncovered = any(getattr(c, kind) and self.covering(num, kind) is None
                        for num, c in counts.items() for kind in KINDS)
        return {**{kind: sum(getattr(c, kind) for c in counts.values()) for kind in KINDS},
                "within": not uncovered and all(r["within"] for r in rows), "budgets": rows}



def stopping(budgets: Budgets, stop_on_error: bool, num: int, status: str, *, forced: bool = False,
             reason: str | None = None) -> tuple[str | None, Judge | None]:
    """How an outcome of step ``num`` stops the pool: the reason it stops it now (``forced``, as a
    key in doubt under --in-doubt stop does; or a failure no budget counts, under stop_on_error),
    or the judge that tells once the journal has counted it (a budget counts it); else neither."""
    why = reason or f"step {num} {status}"
    if forced:
        return why, None
    judge = budgets.judge_for(num, status)
    if judge is not None:
        return None, judge
    return (why if status in KINDS and stop_on_error else None), None


def budgets_of(pool: Tolerate | None, steps: Sequence[tuple[int, Tolerate | None]]) -> Budgets:
    """The budgets of a pool's and its steps' ``tolerate``: a step's own first, then the pool's
    over the steps with none of that kind."""
    found: list[Budget] = []
    for kind in KINDS:
        rest = []
        for num, own in steps:
            if own is not None and kind in own.kinds:
                found.append(Budget(kind, (num,), own.kinds[kind], num))
            else:
                rest.append(num)
        if pool is not None and kind in pool.kinds and rest:
            found.append(Budget(kind, tuple(rest), pool.kinds[kind], None))
    return Budgets(tuple(found))


def budget_line(row: Mapping[str, Any]) -> str:
    """A budget's row of the answer as words: ``11 of 100 calls failed, over step 2's budget of 10
    (tolerate failed: 10%)``."""
    verb = "ended in doubt" if row["kind"] == CallStatus.IN_DOUBT else "failed"
    within = "within" if row["within"] else "over"
    step = row.get("every_call_of_step")
    whole = f": every call of step {step} {verb}" if step else ""
    return (f"{row['calls']:,} of {row['planned']:,} calls {verb}, {within} {_where(row)}'s budget of "
            f"{row['allowed']:,}{_given(row)}{whole}")


def _where(row: Mapping[str, Any]) -> str:
    return "the pool" if row["step"] is None else f"step {row['step']}"


def _given(row: Mapping[str, Any]) -> str:
    """How the file wrote a budget in percent (one in calls says itself)."""
    return "" if isinstance(row["tolerate"], int) else f" (tolerate {row['kind']}: {row['tolerate']})"


def planned_line(row: Mapping[str, Any]) -> str:
    """A budget of a plan as words: ``the pool goes on after up to 10 of its 100 calls failed
    (tolerate failed: 10%)``."""
    verb = "in doubt" if row["kind"] == CallStatus.IN_DOUBT else "failed"
    if row["allowed"] is None or row["planned"] is None:
        # Rows not counted (check without --data), or a step over a table the run writes.
        return f"{_where(row)} goes on after up to {row['tolerate']} of its calls {verb}"
    return (f"{_where(row)} goes on after up to {row['allowed']:,} of its {row['planned']:,} calls "
            f"{verb}{_given(row)}")


def within_budget(answer: Mapping[str, Any]) -> bool:
    """Whether every call of a run's answer that did not land failed or is in doubt within an
    error budget (such a run exits 0): a run that stopped, or left calls not run, is not."""
    tolerated = answer.get("tolerated") or {}
    return bool(tolerated.get("within")) and not answer.get("not_run") and not answer.get("interrupted")


_OVER = re.compile(r"^[0-9]+(\.[0-9]+)?%$")


def allowance_message(what: str, value: Any, shown: str) -> str:
    """The refusal of a budget the file writes wrong (``shown``: the value as a message quotes it)."""
    if isinstance(value, str) and _OVER.match(value) and float(value[:-1]) > 100:
        # A percent, but of more calls than there are.
        return f"{what} must be at most 100% of the planned calls - {value} is over 100%."
    return (f"{what} must be a number of calls (25) or a percent of the planned calls (2%), "
            f"not {shown}.")
