"""The plans of ``tool_pool {"plan": true}`` and ``pool_run {"plan": true}``, kept in the store
folder's journal so that any process serving that folder (another ``pooler mcp``, a restarted one)
commits a plan at most once.

A plan row holds the arguments as the agent gave them (no secret of the server among them: such a
pool is refused a plan), the digests of what the plan was made from (``pooler.run.plandigests``,
as a plan file of ``pooler plan`` keeps them), when it expires, and once committed, who
committed it and the answer.  The claim is one ``UPDATE ... WHERE state = 'planned'``: of two
commits that race, one runs the plan and the other waits for its answer.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pooler import strictjson
from pooler.errors import StoreError
from pooler.journal.documents import Answer
from pooler.journal.liveness import alive, host
from pooler.journal.sqlite.journal import Journal
from pooler.statuses import PlanState

if TYPE_CHECKING:
    from pooler.mcp.tool_pool import PoolRuns

#: The default life of a plan (``pooler mcp --plan-ttl``): an hour.
DEFAULT_TTL = 3600.0


@dataclass(frozen=True)
class PlanRow:
    id: str
    task: str
    expires: float
    digest: str
    arguments: dict[str, Any]
    #: planned, committed (running, or its committer died), done (answer recorded), failed (an error)
    state: str
    host: str | None
    pid: int | None
    answer: Answer | None

    def committer_alive(self) -> bool:
        return self.pid is not None and self.host == host() and alive(self.pid)


def when(epoch: float) -> str:
    """A moment as the answers give it: UTC, ISO 8601, to the second."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class PlanStore:
    """The ``plans`` table of one SQLite journal file (made by its migration 0009)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._journal = Journal(path)

    def close(self) -> None:
        self._journal.close()

    def add(self, task: str, digest: str, arguments: dict[str, Any], ttl: float) -> PlanRow:
        now = time.time()
        plan_id = "plan-" + secrets.token_hex(8)
        self._journal.execute("plan_add", {
            "id": plan_id, "task": task, "created": now, "expires": now + ttl, "digest": digest,
            "arguments": strictjson.dumps(arguments, ensure_ascii=False), "state": PlanState.PLANNED})
        return PlanRow(plan_id, task, now + ttl, digest, arguments, PlanState.PLANNED, None, None, None)

    def get(self, plan_id: str) -> PlanRow | None:
        r = self._journal.one("plan_get", {"id": plan_id})
        if r is None:
            return None
        return PlanRow(r["id"], r["task"], float(r["expires"]), r["digest"], json.loads(r["arguments"]),
                       r["state"], r["host"], None if r["pid"] is None else int(r["pid"]),
                       None if r["answer"] is None else json.loads(r["answer"]))

    def claim(self, plan_id: str) -> bool:
        """Take the plan for running: true for exactly one caller, and only before it expires."""
        return self._journal.execute("plan_claim", {
            "committed": PlanState.COMMITTED, "planned": PlanState.PLANNED, "now": time.time(),
            "host": host(), "pid": os.getpid(), "id": plan_id}) == 1

    def fail(self, plan_id: str) -> None:
        """The commit ended in an error: what it did is what the journal holds of its task."""
        self._journal.execute("plan_state", {"state": PlanState.FAILED, "answer": None, "id": plan_id})

    def finish(self, plan_id: str, answer: Answer) -> None:
        """The committed plan's answer (already masked): every later commit returns it."""
        self._journal.execute("plan_state", {
            "state": PlanState.DONE, "answer": strictjson.dumps(answer, ensure_ascii=False), "id": plan_id})


def store_tools(runs: PoolRuns) -> list[dict[str, Any]]:
    """The store's declarations, which a plan is checked against and digests (a read)."""
    reply = runs.client.tool_list()
    tools = reply.data.get("tools")
    if not reply.result or not isinstance(tools, list):
        raise StoreError(f"the store refused tool_list: {reply.message} - the pool cannot be checked against "
                         "its declarations, so nothing was planned.", store=runs.client.store, sent=True)
    return tools


def plan_file(runs: PoolRuns, plan_id: str) -> Path:
    """Where the server writes a plan's file: beside the store folder's journal."""
    return runs.journal_path.parent / "plans" / f"{plan_id}.jsonl"
