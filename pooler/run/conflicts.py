"""The conflicts of ``pooler apply``: the planned rows that moved in the store since the plan.

A call of a step with ``compare:`` carries the class its row had when planned (new, changed,
unchanged).  Before such a call is sent, the store is read again for its rows, by the same compare;
a row whose class is not the planned one moved since the plan (another writer changed it, or added
it) and is a conflict: not sent, listed, exit 1, unless ``--refresh`` sends it as it is now.  A
step without ``compare:`` has no classes, and so no conflicts: nothing is read again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import groupby

from pooler.pool.model import Pool, Step
from pooler.run.savedplan import PlannedCall

#: The compare read again for a step's planned calls: each call's class as the store has it now,
#: in the calls' order (read in batches by the compare reader).
Reread = Callable[[Step, Sequence[PlannedCall]], Sequence[str]]


def moved_rows(step: Step, planned: Sequence[PlannedCall], reread: Reread | None) -> list[PlannedCall]:
    """The planned calls of ``step`` whose rows moved since the plan; none for a step without
    ``compare:`` (no call carries a class) or with no reader to read the store again."""
    classed = [call for call in planned if "compare" in call]
    if not classed or reread is None or getattr(step, "compare", None) is None:
        return []
    now = reread(step, classed)
    return [call for call, found in zip(classed, now, strict=True) if found != call["compare"]]


def conflicts(pool: Pool, calls: Iterable[PlannedCall], reread: Reread | None) -> list[PlannedCall]:
    """Every conflict of a plan, step by step; nothing is read when no step has ``compare:``."""
    if reread is None or not any(getattr(s, "compare", None) is not None for s in pool.steps):
        return []
    steps = {s.num: s for s in pool.steps}
    found: list[PlannedCall] = []
    for num, group in groupby(calls, key=lambda c: c["step"]):
        found.extend(moved_rows(steps[num], list(group), reread))
    return found
