"""A tool_pool call's pool as a task of the session's task ``T``: it runs as the pool task
``T-<digest>`` (the digest of its steps and options), so the same pool sent again joins its task and
no call that landed is sent again, while a pool with other steps or options is a pool of its own.
The keys a pool of the session landed hold for its other pools too (``key_scope``), and every
keyed call is sent as ``Idempotency-Key: T:<key>``.

To the agent the session has one task: every answer names ``T``, and ``tool_pool {"task": T}``
finds the latest pool task of ``T`` (``pool_task``).  ``pooler runs`` lists the pool tasks, and a
``pooler run`` of that pool with ``--task T-<digest>`` could share one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from dataclasses import replace
from typing import Any, cast

from pooler.client.http import ToolRunClient
from pooler.journal.documents import Answer
from pooler.journal.work import TaskJournal
from pooler.pool.compiler import Plan
from pooler.pool.model import Pool
from pooler.run.config import RunConfig
from pooler.run.events import Reporter
from pooler.run.executor import RunnerConfig, run_plan
from pooler.run.workplan import fingerprint

#: How many of the journal's latest tasks ``pool_task`` looks through for a session's pools.
SCAN = 500


def pool_task_id(session: str, pool: Pool) -> str:
    """The pool task of ``pool`` in the session ``session``: its steps and its options."""
    options = json.dumps(dataclasses.asdict(pool.options), sort_keys=True, default=str)
    digest = hashlib.sha256(f"{fingerprint(pool)}\n{options}".encode()).hexdigest()
    return f"{session}-{digest[:12]}"


def as_session(answer: Answer, session: str) -> Answer:
    """A pool task's answer as the agent reads it: naming the session's task."""
    return {**answer, "task": session} if "task" in answer else answer


def pool_task(journal: TaskJournal, session: str, latest: str | None = None) -> str | None:
    """The pool task ``{"task": session}`` tells: ``latest`` (the pool this process ran last under
    it), else the newest task of the journal whose key scope is ``session``; None when there is
    none."""
    if latest is not None and journal.task(latest) is not None:
        return latest
    for row in journal.tasks(SCAN):
        if not row.id.startswith(f"{session}-"):
            continue
        shared = journal.shared(row.id)
        if shared is not None and shared.get("key_scope") == session:
            return row.id
    return None


class _AsSession:
    """A reporter told the session's task where the run names its pool task."""

    def __init__(self, reporter: Reporter, session: str) -> None:
        self._reporter = reporter
        self._session = session

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        self._reporter.pool_started(pool, self._session, total)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reporter, name)


def run_session_pool(plan: Plan, client: ToolRunClient, config: RunConfig, journal: TaskJournal, *,
                     reporter: Reporter | None = None, stop: threading.Event | None = None) -> Answer:
    """The pool's answer, run as (or joined to) its pool task (``config.task_id`` is the session's,
    the pool task ``pool_task_id``)."""
    session = config.task_id
    assert session is not None
    # The lease outlasts the read timeout, as a runner's must (see docs/multihost.md).
    taking = RunnerConfig(lease=max(120.0, client.read_timeout * 2), key_scope=session)
    told = None if reporter is None else cast(Reporter, _AsSession(reporter, session))
    answer = run_plan(plan, client, replace(config, task_id=pool_task_id(session, plan.pool)),
                      journal=journal, reporter=told, stop=stop, taking=taking)
    return as_session(answer, session)
