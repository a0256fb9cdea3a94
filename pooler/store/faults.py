"""Injected failures of /tool_run, to try a client against a store that misbehaves.

Each request draws one number from a seeded ``random.Random`` (under a lock, so a ``--seed`` run
draws the same sequence); the kinds' rates are laid end to end, and the number falls into one of
them or into none. MELBIS_AGENT_TEST CmdOps is never faulted, so a test can read the ops of a
faulty store through it, and it draws no number.

What each kind does, and whether the command runs:

- ``refuse``: the connection is closed before the call is processed; nothing runs.
- ``crash``: HTTP 500 text before the command; nothing runs.
- ``reset``: the command runs (its op is recorded), then the connection closes with no answer.
- ``slow``: the command runs, the answer leaves only after ``--slow-ms``.
- ``garbage``: the command runs, the answer is HTTP 200 with a body that is not JSON.
- ``truncate``: the command runs, the answer is cut short of its Content-Length and the connection closes.
- ``huge``: the command runs, the answer is padded to more than 50 MB.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

from pooler.errors import UsageError

KINDS = ("refuse", "reset", "slow", "garbage", "truncate", "crash", "huge")
#: Kinds decided before the command, which then does not run.
BEFORE = frozenset({"refuse", "crash"})
HUGE_BYTES = 50 << 20
GARBAGE = b'<html><body><h1>502 Bad Gateway</h1></body></html>\n{"ok": tr'


@dataclass(frozen=True)
class Rule:
    kind: str
    rate: float


def parse_rule(text: str) -> Rule:
    """``KIND:RATE`` as ``--fault`` takes it; raises ``UsageError``."""
    kind, sep, rate_text = text.partition(":")
    if kind not in KINDS:
        raise UsageError(f"--fault {text}: the kind is one of {', '.join(KINDS)}")
    try:
        rate = float(rate_text) if sep else -1.0
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise UsageError(f"--fault {text}: write KIND:RATE with RATE from 0 to 1, like {kind}:0.1")
    return Rule(kind, rate)


class FaultPlan:
    """Which fault, if any, strikes each request."""

    def __init__(self, rules: list[Rule], seed: int | None = None, slow_ms: int = 30000) -> None:
        if sum(r.rate for r in rules) > 1.0 + 1e-9:
            raise UsageError("--fault: the rates add up to more than 1 - a request suffers one fault at most")
        self.rules = rules
        self.slow_ms = slow_ms
        self._rng = random.Random(seed)  # noqa: S311 - draws of faults, not secrets
        self._lock = threading.Lock()

    def pick(self, request: dict[str, Any]) -> str | None:
        if not self.rules or exempt(request):
            return None
        with self._lock:
            draw = self._rng.random()
        edge = 0.0
        for rule in self.rules:
            edge += rule.rate
            if draw < edge:
                return rule.kind
        return None


def exempt(request: dict[str, Any]) -> bool:
    """CmdOps: never faulted nor limited, so the ops of any store stay readable."""
    unit, command = request.get("unit"), request.get("command")
    return (isinstance(unit, str) and isinstance(command, str) and unit.upper() == "MELBIS_AGENT_TEST"
            and command.lower() == "cmdops")


def crash_text(request: dict[str, Any]) -> bytes:
    unit, command = request.get("unit"), request.get("command")
    return f"{unit}\\{command} failed: the store broke down (injected fault: crash)".encode()
