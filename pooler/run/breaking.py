"""What a runner does when its breaker opens (run/flow.py, pool/breaker.py): it tries the store
with ``tool_list``, which changes nothing there, about once a second for up to the breaker's
``wait``; the run goes on if the store answers, and the task stops if it does not."""

from __future__ import annotations

import threading
import time

from pooler.client import answer_kinds as kinds
from pooler.client.http import ToolRunClient
from pooler.errors import StoreError
from pooler.pool.breaker import BreakerRule
from pooler.run.flow import STORE_DOWN, Flow

#: Seconds between two tries of a store that did not answer.
TRY_EVERY = 1.0


def answers(client: ToolRunClient) -> bool:
    """Whether the store answered ``tool_list`` itself (a gateway's answer is not the store's)."""
    try:
        reply = client.tool_list()
    except StoreError:
        return False
    reply.release()
    return reply.kind is not kinds.GATEWAY


def store_down(rule: BreakerRule, task: str) -> str:
    """Why the task stopped, as its answer and the summary line tell it."""
    return (f"{STORE_DOWN}: {rule.after} calls in a row did not reach it, and it did not answer tool_list "
            f"within {rule.wait:g} s; the calls not started are not run - once it is back, "
            f"`pooler redrive {task}` (or the same --task {task}) goes on")


def try_store(client: ToolRunClient, rule: BreakerRule, flow: Flow, stop: threading.Event, task: str
              ) -> str | None:
    """Try the store until it answers (None, the breaker closed) or ``rule.wait`` is over: why
    the task stops.  A stop of the run ends the tries (None: the stop tells why)."""
    began = time.monotonic()
    deadline = began + rule.wait
    while True:
        if answers(client):
            flow.closed(f"the store answered tool_list after {time.monotonic() - began:.1f} s: "
                        "calls start again")
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            told = store_down(rule, task)
            flow.event("store down", told)
            return told
        if stop.wait(min(TRY_EVERY, left)):
            return None
