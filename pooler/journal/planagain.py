"""A run again's work on the rows of a task, as both backends do it in its transaction: the
steps over a table sent again planned afresh (``plan_again``), and the chunks beyond a widened
sample cut at it (``cut_at_sample``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pooler.journal.work import OverTable, Split


class PlanAgain(Protocol):
    """What ``plan_again`` does to the work rows of a task a run again has begun, in that run's
    transaction."""

    def open(self, num: int) -> bool:
        """Whether step ``num`` has a call this run sends (not done, not beyond its sample)."""

    def drop(self, num: int) -> None:
        """The calls of step ``num`` this run would send (ready, or beyond the sample) dropped."""

    def restore(self, placeholder: tuple[Any, ...]) -> None:
        """The placeholder written, unless the step still has it."""

    def drop_tables(self) -> None:
        """The table rows of every call that is not done dropped: they are the answers of calls
        this run sends again, or of calls no longer planned."""


class StatementsPlanAgain:
    """``PlanAgain`` by a backend's three statements (the step open, its calls dropped, the table
    rows of calls not done dropped; each takes the task first), on the connection ``db`` of the
    run again's transaction; ``restore`` writes a placeholder the step lacks."""

    def __init__(self, db: Any, task: str, statements: tuple[str, str, str],
                 restore: Callable[[tuple[Any, ...]], object]) -> None:
        self.db = db
        self.task = task
        self._open, self._drop, self._tables = statements
        self._restore = restore

    def open(self, num: int) -> bool:
        return bool(self.db.execute(self._open, (self.task, num)).fetchone()[0])

    def drop(self, num: int) -> None:
        self.db.execute(self._drop, (self.task, num))

    def restore(self, placeholder: tuple[Any, ...]) -> None:
        self._restore(placeholder)

    def drop_tables(self) -> None:
        self.db.execute(self._tables, (self.task,))


def cut_at_sample(db: Any, task: str, sample: int, *, statements: tuple[str, str, str, str], split: Split,
                  write: Callable[[Iterable[tuple[Any, ...]]], object], rows: Callable[[Any], list[Any]]
                  ) -> None:
    """The chunks planned beyond a task's sample that a wider ``sample`` cuts, split in two at its
    end, in the caller's transaction on ``db``: the part after the cut takes the next idx, and the
    calls after it one more each, so the claim hands them out in file order still.  ``statements``:
    the backend's chunks cut, room made (out of the way, then back one on), the chunk dropped;
    ``rows`` reads a chunk's data as the backend gives it."""
    cut_sql, room_out, room_back, drop = statements
    for num, idx, first, data in db.execute(cut_sql, (task, sample, sample)).fetchall():
        db.execute(room_out, (task, num, idx))
        db.execute(room_back, (task, num))
        db.execute(drop, (task, num, idx))
        write(split(sample, num, idx=idx, next_idx=idx + 1, first=int(first), data=rows(data)))


def plan_again(again: PlanAgain, over: Iterable[OverTable]) -> None:
    """A run again sends some steps again (failed, not run, completed without a key): a step over
    the table of one of them gets its calls from the table that step gives this time, not from
    the one it gave before.  Its calls that would be sent are dropped and its placeholder put
    back (made again once the step is done, leaving out the keys of the calls it keeps, done or
    in doubt); in step order, so a step over that step's table follows."""
    for step in over:
        if again.open(step.source):
            again.drop(step.num)
            again.restore(step.placeholder)
    again.drop_tables()
