"""Rate limits (``rate: {per_second: 20, burst: 5, key: params.warehouse}``): how fast a pool's
calls may start, and which bucket a call takes its slot from.

A bucket is a generic cell rate (GCRA, the token bucket as one timestamp): a call starts at the
next slot, ``1 / per_second`` after the one before, and up to ``burst`` calls may start at once
after a quiet spell.  The journal keeps the buckets (``WorkStore.pace``), so the limit holds for a
task as a whole, whichever runners on whichever hosts share it.  A step's ``rate`` wins over the
pool's; the pool's is one bucket for every step without a rate of its own.  With ``key`` a bucket
is kept per value of that dotted path into a call's params, as ``serialize_on`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pooler.plural import plural


@dataclass(frozen=True)
class Rate:
    """A limit on calls started: ``per_second``, ``burst`` at once, a bucket a ``key`` value."""

    per_second: float
    burst: int = 1
    key: str | None = None

    @property
    def interval(self) -> float:
        """Seconds between two slots."""
        return 1.0 / self.per_second

    @property
    def tolerance(self) -> float:
        """How far ahead of its slot a call may start: what lets ``burst`` calls go at once."""
        return (self.burst - 1) * self.interval

    def text(self) -> str:
        """``at most 20 calls a second, 5 at once, a bucket per params.warehouse``."""
        speed = f"{self.per_second:g}"
        out = f"at most {speed} call{'' if speed == '1' else 's'} a second"
        if self.burst > 1:
            out += f", {self.burst} at once"
        if self.key:
            out += f", a bucket per params.{self.key}"
        return out

    def doc(self) -> dict[str, Any]:
        """As a file writes it."""
        out: dict[str, Any] = {"per_second": self.per_second, "burst": self.burst}
        if self.key:
            out["key"] = self.key
        return out


def rate_of(value: Any) -> Rate | None:
    """The limit a ``rate`` mapping writes (the schema has refused any other)."""
    if not isinstance(value, dict):
        return None
    per_second = value.get("per_second")
    if not isinstance(per_second, int | float) or isinstance(per_second, bool) or per_second <= 0:
        return None
    burst = value.get("burst", 1)
    key = value.get("key")
    return Rate(float(per_second), burst if isinstance(burst, int) and burst >= 1 else 1,
                key if isinstance(key, str) and key else None)


@dataclass(frozen=True)
class Pace:
    """A step's limit and the bucket it takes its slots from."""

    rate: Rate
    #: ``pool`` for the pool's bucket, ``step N`` for a step's own.
    bucket: str

    def bucket_of(self, key_value: str | None) -> str:
        """The bucket of a call whose ``key`` value is ``key_value``."""
        if self.rate.key is None:
            return self.bucket
        return f"{self.bucket} {self.rate.key}={key_value}"


def paces(pool_rate: Rate | None, steps: list[tuple[int, Rate | None]]) -> dict[int, Pace]:
    """Each step's limit: its own, else the pool's (one bucket for all such steps)."""
    out: dict[int, Pace] = {}
    for num, own in steps:
        if own is not None:
            out[num] = Pace(own, f"step {num}")
        elif pool_rate is not None:
            out[num] = Pace(pool_rate, "pool")
    return out


def buckets(found: dict[int, Pace]) -> list[tuple[Pace, list[int]]]:
    """Each bucket's limit and the steps that take their slots from it."""
    told: dict[str, tuple[Pace, list[int]]] = {}
    for num, pace in sorted(found.items()):
        told.setdefault(pace.bucket, (pace, []))[1].append(num)
    return list(told.values())


def rate_line(bucket: str, steps: list[int], rate: Rate) -> str:
    """What ``check`` and ``--dry-run`` tell of a bucket: ``the pool (its 2 steps without a rate)
    starts at most 20 calls a second, 5 at once``."""
    where = "the pool" if bucket == "pool" else bucket
    of = f" (its {plural(len(steps), 'step')} without a rate)" if bucket == "pool" else ""
    return f"{where}{of} starts {rate.text()}"
