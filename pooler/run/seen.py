"""The keys a runner landed, kept in a fixed few megabytes whatever the rows: a Bloom filter that
says "surely not landed here" for almost every new key, and "maybe" for a key landed (or, rarely,
for one that was not), which the journal then settles (``WorkStore.landed``)."""

from __future__ import annotations

from typing import Any

from pooler.journal.documents import Entry
from pooler.run.callplan import Outcome, Prepared
from pooler.statuses import CallStatus

#: Bits of the filter: 4 MB, so that a million keys are told "maybe" wrongly about once in 20,000.
BITS = 1 << 25
#: Bits a key sets.
HASHES = 5


class SeenKeys:
    """Keys added; ``maybe(key)`` is False for a key surely never added."""

    def __init__(self, bits: int = BITS) -> None:
        # Zeroed at the first key, not as every run starts (some milliseconds): a run without
        # keys never needs it.
        self._bits = bytearray()
        self._size = bits // 8
        self._mask = bits - 1
        self.added = 0

    def _spots(self, key: str) -> list[int]:
        # Two hashes make the others (Kirsch and Mitzenmacher); the process's own str hash is enough,
        # as the filter never leaves the process.
        first, second = hash(key), hash((key, 1)) | 1
        return [(first + i * second) & self._mask for i in range(HASHES)]

    def add(self, key: str) -> None:
        if not self._bits:
            self._bits = bytearray(self._size)
        for spot in self._spots(key):
            self._bits[spot >> 3] |= 1 << (spot & 7)
        self.added += 1

    def maybe(self, key: str) -> bool:
        if not self.added:
            return False
        return all(self._bits[spot >> 3] & (1 << (spot & 7)) for spot in self._spots(key))


def repeat(ready: Prepared, entry: Entry, detail: Any) -> Outcome:
    """A call whose key this run landed already: skipped, with that call's answer."""
    skipped: Entry = {**entry, **ready.call.head(), "status": CallStatus.SKIPPED, "key": entry.get("key"),
                      "step_id": entry.get("step_id")}
    return Outcome(ready.call, CallStatus.SKIPPED, skipped, detail, step_id=entry.get("step_id"))
