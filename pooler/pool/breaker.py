"""The breaker of a pool (``breaker: {after: 5, wait: 60}``, or ``breaker: false``): when a store
goes down in the middle of a run, one clear stop instead of every remaining call spent as a
failure that never left.

After ``after`` requests in a row that never reached the store (connection refused, unknown host,
TLS) or got a gateway's answer, no call starts while the store is tried with ``tool_list`` (no
side effect) for up to ``wait`` seconds.  If it answers the run goes on; otherwise the pool stops
and the calls not started stay not run, for ``pooler redrive`` once the store is back.  On by
default: a pool without ``breaker`` has the one below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pooler.plural import plural


@dataclass(frozen=True)
class BreakerRule:
    """``after`` requests in a row that found the store down trip it; ``wait`` seconds of trying."""

    after: int = 5
    wait: float = 60.0

    def text(self) -> str:
        """``after 5 calls in a row that do not reach the store, tries it for 60 s``."""
        return (f"after {plural(self.after, 'call')} in a row that do not reach the store, "
                f"tries it for {self.wait:g} s before it stops")

    def doc(self) -> dict[str, Any]:
        return {"after": self.after, "wait": self.wait}


#: The breaker of a pool that names none.
DEFAULT_BREAKER = BreakerRule()


def breaker_of(value: Any) -> BreakerRule | None:
    """The breaker a ``breaker`` value writes (the schema has refused any other): None for false."""
    if value is False:
        return None
    if not isinstance(value, dict):
        return DEFAULT_BREAKER
    after, wait = value.get("after", DEFAULT_BREAKER.after), value.get("wait", DEFAULT_BREAKER.wait)
    return BreakerRule(after if isinstance(after, int) and after >= 1 else DEFAULT_BREAKER.after,
                       float(wait) if isinstance(wait, int | float) and wait >= 0 else DEFAULT_BREAKER.wait)
