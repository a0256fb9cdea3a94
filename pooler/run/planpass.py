"""A shared task planned from the check's own pass over each data file, so the runner that plans
it reads each file once.

The compile step hands every row it checks, with the key it filled, to a ``PlanPass`` (the
``RowSink`` of ``pool/datafiles.py``), which makes the row's call as ``Planner`` makes it (its key
masked, its serial digest, the rows of a chunk together, the sample respected) and writes it at
once to the ``COPY`` of the transaction that creates (or widens) the task.  Nothing is staged on
disk: the rows wait in that transaction, which commits only once the check has passed; a problem
the check finds rolls it back, and leaves no task and no rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import count, islice
from typing import Any

from pooler.journal.work import Planned, Write
from pooler.pool.datafiles import DataFile
from pooler.pool.model import Step
from pooler.run.workplan import Planner


class PlanPass:
    """The work rows of a task written as the check reads its data files, in the order of the
    steps.  ``planned``: what a sampled plan holds already (widening it: each file's rows after
    those, numbered on from its next ``idx``, and a placeholder again for a step over a table
    whose calls were made); empty for a new task, which also gets a call for each step that is
    not over rows."""

    def __init__(self, planner: Planner, write: Write, planned: Mapping[int, Planned] | None = None) -> None:
        self._planner = planner
        self._write = write
        self._planned = dict(planned) if planned is not None else None
        self._steps = list(planner.pool.steps)
        #: Steps before this index are written (their calls, or all of their rows so far).
        self._next = 0
        self._current: Step | None = None
        self._skip = 0
        self._idx = 0
        self._part: list[dict[str, Any]] = []
        self._part_first = 0
        self._part_last = 0
        self._part_key: str | None = None
        #: The steps whose rows the check handed over, and the idx each one's next call takes.
        self._done: dict[int, int] = {}
        #: Each data file's rows, counted as the plan read it through beyond the sample (None: the
        #: check counted none).
        self.rows: dict[int, int | None] = {}
        #: Steps over a file whose rows the check did not hand over.
        self._unread: list[Step] = []
        #: The call of a row of the step read now, when it is a call a row.
        self._one: Callable[[int, int, dict[str, Any], str | None], tuple[Any, ...]] | None = None

    # The RowSink side, called by the compile step.

    def begin(self, values: Mapping[str, Any], secrets: Iterable[str]) -> None:
        """The planner fills keys from the variables it was given: the same values."""

    def row(self, step: Step, index: int, row: dict[str, Any], key: str | None) -> None:
        if step is not self._current:
            self._enter(step)
        if index < self._skip:
            return
        keep = self._planner.compared.get(step.num)
        if keep is not None and not keep.sends(index):
            # Unchanged: counted by the compare, never planned.
            return
        one = self._one
        if one is not None:
            self._write(one(self._idx, index, row, key))
            self._idx += 1
            return
        fe = step.for_each
        assert fe is not None
        assert fe.chunk
        if not self._part:
            # The check fills the key of the first row of each of its chunks; a plan widened after
            # a sample that ended inside a chunk starts its chunks elsewhere, and fills its own.
            self._part_first, self._part_key = index, key
        self._part.append(row)
        self._part_last = index
        if len(self._part) == fe.chunk:
            self._chunk(step)

    def done(self, step: Step, rows: int) -> None:
        if step is not self._current:
            self._enter(step)
        if self._part:
            self._chunk(step)
        self._done[step.num] = self._idx

    # The planning runner's side.

    def finish(self, data: Mapping[int, DataFile]) -> None:
        """Once the check passed: the calls of the steps after the last one read.  A step over a
        file the check did not hand over (none, when it passes: a file it could not read whole
        is a problem) is read from its file."""
        while self._next < len(self._steps):
            step = self._steps[self._next]
            self._next += 1
            self._others(step)
        for step in self._unread:
            held = self._held(step)
            rows = islice(data[step.num].iter_rows(), held.rows, None)
            for values in self._planner.rows_of(step, rows, first=held.rows, idx=held.next_idx):
                self._write(values)
        self._unread = []
        sample = self._planner.sample
        if sample is not None and self._planner.beyond:
            # The check read the sample of each file: the rows after it are planned beyond it, so
            # a run that asks for them needs no data file.
            for step in self._steps:
                if step.num in self._done and step.num in data:
                    rest = islice(data[step.num].iter_rows(), sample, None)
                    # Counted as they are read: the task's record of the file needs no read of its own.
                    counter = count()
                    read = (row for row, _ in zip(rest, counter, strict=False))  # counter is endless
                    for values in self._planner.rows_of(step, read, first=sample, idx=self._done[step.num]):
                        self._write(values)
                    beyond = next(counter)
                    self.rows[step.num] = sample + beyond if beyond else data[step.num].rows
        self._current = None
        self._one = None

    def _enter(self, step: Step) -> None:
        """Start the rows of ``step``: first the calls of every step before it not yet written."""
        while self._next < len(self._steps):
            ahead = self._steps[self._next]
            self._next += 1
            if ahead is step:
                break
            self._others(ahead)
        self._current = step
        fe = step.for_each
        self._one = self._planner.caller(step) if fe is not None and not fe.chunk else None
        held = self._held(step)
        self._skip, self._idx = held.rows, held.next_idx
        self._part = []

    def _others(self, step: Step) -> None:
        """The work row of a step whose rows the pass does not read: one call, or a placeholder."""
        fe = step.for_each
        if fe is None:
            if self._planned is None:
                self._write(self._planner.single(step))
        elif fe.file:
            if step.num not in self._done:
                self._unread.append(step)
        elif not self._held(step).placeholder:
            self._write(self._planner.placeholder(step))

    def _held(self, step: Step) -> Planned:
        return (self._planned or {}).get(step.num, Planned(0, 0, False))

    def _chunk(self, step: Step) -> None:
        part, first = self._part, self._part_first
        # The last row's own number: a compare leaves out unchanged rows, so a chunk may span more.
        self._write(self._planner.call(step, self._idx, (first, self._part_last, len(part)), part,
                                       self._part_key))
        self._idx += 1
        self._part = []
