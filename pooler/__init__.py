"""pooler: run pools of store AI tool calls, checked before anything is sent and safe to rerun.

The public API, for driving pooler from Python without the command line::

    import pooler

    pool = pooler.load_pool("pools/import.yaml")
    plan = pooler.compile_pool(pool, inputs=pooler.Inputs())   # CheckFailed: every problem at once
    client = pooler.ToolRunClient("http://127.0.0.1:8765", token)
    answer = pooler.run_plan(plan, client, pooler.RunConfig(), journal=pooler.Journal(path))

Names are imported on first use, so ``import pooler`` stays cheap for a command that needs only a
part of it (``pooler check`` never loads the HTTP client).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pooler.version import __version__

#: public name -> the module that defines it (``module:name`` where it is defined under another name)
_EXPORTS: dict[str, str] = {
    # what a pool is, and how it is read and checked
    "Pool": "pooler.pool.model",
    "Step": "pooler.pool.model",
    "load_pool": "pooler.pool.loader",
    "load_pool_value": "pooler.pool.loader",
    "check_pool": "pooler.pool.checks",
    "check_options": "pooler.pool.checks",
    "compile_pool": "pooler.pool.compiler",
    "Plan": "pooler.pool.compiler",
    "Inputs": "pooler.pool.compiler",
    "resolve_variables": "pooler.pool.variables",
    # how it runs
    "run_plan": "pooler.run.executor",
    "run_pool": "pooler.run.executor",
    "RunConfig": "pooler.run.config",
    "StopSignal": "pooler.run.config",
    "Journal": "pooler.journal.sqlite.tasks:SqliteTaskJournal",
    "Reporter": "pooler.run.events",
    "NullReporter": "pooler.run.events",
    # the client
    "ToolRunClient": "pooler.client.http",
    "Reply": "pooler.client.http",
    "Redactor": "pooler.redact",
    # the errors
    "Problem": "pooler.errors",
    "PoolerError": "pooler.errors",
    "UsageError": "pooler.errors",
    "InputError": "pooler.errors",
    "CheckFailed": "pooler.errors",
    "StoreError": "pooler.errors",
    "LockedError": "pooler.errors",
    "JournalError": "pooler.errors",
    # what every stage says in the same words
    "CallStatus": "pooler.statuses",
    "ExitStatus": "pooler.exits",
}

__all__ = [
    "CallStatus",
    "CheckFailed",
    "ExitStatus",
    "InputError",
    "Inputs",
    "Journal",
    "JournalError",
    "LockedError",
    "NullReporter",
    "Plan",
    "Pool",
    "PoolerError",
    "Problem",
    "Redactor",
    "Reply",
    "Reporter",
    "RunConfig",
    "Step",
    "StopSignal",
    "StoreError",
    "ToolRunClient",
    "UsageError",
    "__version__",
    "check_options",
    "check_pool",
    "compile_pool",
    "load_pool",
    "load_pool_value",
    "resolve_variables",
    "run_plan",
    "run_pool",
]

if TYPE_CHECKING:
    from pooler.client.http import Reply, ToolRunClient
    from pooler.errors import (
        CheckFailed,
        InputError,
        JournalError,
        LockedError,
        PoolerError,
        Problem,
        StoreError,
        UsageError,
    )
    from pooler.exits import ExitStatus
    from pooler.journal.sqlite.tasks import SqliteTaskJournal as Journal
    from pooler.pool.checks import check_options, check_pool
    from pooler.pool.compiler import Inputs, Plan, compile_pool
    from pooler.pool.loader import load_pool, load_pool_value
    from pooler.pool.model import Pool, Step
    from pooler.pool.variables import resolve_variables
    from pooler.redact import Redactor
    from pooler.run.config import RunConfig, StopSignal
    from pooler.run.events import NullReporter, Reporter
    from pooler.run.executor import run_plan, run_pool
    from pooler.statuses import CallStatus


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pooler' has no attribute {name!r}")
    module, _, defined = module.partition(":")
    value = getattr(importlib.import_module(module), defined or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
