"""``serialize_on`` within one runner: its calls of a value in flight, and those that wait for it.

Across runners the journal gates a value (``WorkStore.gate`` with the value's digest); within a
runner a call of a value waits, still this runner's, until its call of that value in flight ends,
and then starts in the order it came."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future
from typing import Any

from pooler.journal.work import WorkRow
from pooler.run.callplan import Prepared

#: A call waiting for its value: its work row, the call, its fencing epoch (None: gated only when
#: it starts, its value given by a reference) and its value.
Held = tuple[WorkRow, Prepared, "int | None", "str | None"]


class SerialGate:
    """The values of this runner's calls in flight, and the calls held back for them."""

    def __init__(self) -> None:
        self._busy: Counter[str] = Counter()
        self._values: dict[Future[Any], str] = {}
        self.held: list[Held] = []

    def waits(self, value: str | None, epoch: int | None) -> bool:
        """Whether a call of ``value`` must wait: one of its value is in flight here, or (a call
        not gated yet) one waits before it.  A call gated already waits only for this runner's call
        in flight: the journal let it out, so no call of its value waits on another runner (one
        that waits here for it would wait for ever)."""
        if value is None:
            return False
        return bool(self._busy[value]) or (epoch is None and any(v == value for *_, v in self.held))

    def hold(self, held: Held) -> None:
        self.held.append(held)

    def take(self) -> list[Held]:
        """The calls held, in the order they came; none is held after."""
        held, self.held = self.held, []
        return held

    def started(self, future: Future[Any], value: str | None) -> None:
        if value is not None:
            self._busy[value] += 1
            self._values[future] = value

    def ended(self, future: Future[Any]) -> str | None:
        """The value of a call that ended, now free of it."""
        value = self._values.pop(future, None)
        if value is not None:
            self._busy[value] -= 1
        return value
