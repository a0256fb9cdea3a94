"""tool_pool on a PostgreSQL journal (``pooler mcp --journal postgresql://...``).

Each pool runs as a shared task named after the session's task and the pool's steps
(``<task>-<digest>``): the same pool sent again joins its task, so no call that landed is sent
again, and any ``pooler run`` of that pool file with ``--task <task>-<digest>`` could share it.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.pool.model import Pool
from pooler.run.events import Reporter
from pooler.run.executor import RunConfig
from pooler.shared.plan import fingerprint
from pooler.shared.runner import SharedConfig, run_shared


def run_shared_pool(pool: Pool, client: ToolRunClient, config: RunConfig, url: str, *,
                    reporter: Reporter | None = None, stop: threading.Event | None = None) -> dict[str, Any]:
    """The pool's answer, run as (or joined to) its shared task (``config.task_id`` is the session's)."""
    session = config.task_id
    config = replace(config, task_id=f"{session}-{fingerprint(pool)[:12]}")
    # The lease outlasts the read timeout, as a runner's must (see docs/multihost.md).
    lease = max(120.0, client.read_timeout * 2)
    # The session's keys hold across its pools, as they do under its one task on SQLite.
    shared = SharedConfig(url=url, lease=lease, key_scope=session)
    return run_shared(pool, client, config, shared, reporter=reporter, stop=stop)
