"""``tool_pool {"task": T}``: what a task has done so far, from the journal, sending nothing.

An agent whose call timed out on its side, or whose connection dropped, asks this instead of
calling again: the answer tells what landed, what failed and what is in doubt.  A finished task
gives the answer its run recorded; a task still running gives the calls recorded so far (the ones
sent without an answer yet are in doubt, with ``status: running``); a task whose run died gives
its partial answer, as ``pooler show`` does.
"""

from __future__ import annotations

from typing import Any

from pooler.errors import InputError
from pooler.run.journal import Journal
from pooler.run.taskview import partial_answer
from pooler.statuses import TaskStatus


def unknown_task(task: str, where: str) -> InputError:
    return InputError(f"no task {task} in the journal {where} - a task is named in every tool_pool answer "
                      "(task); give one of those, or start the pool with tool_pool.")


def sqlite_task_answer(journal: Journal, task: str, *, running_here: bool) -> dict[str, Any]:
    """The task's answer so far from a SQLite journal; ``running_here``: this process runs it now."""
    row = journal.task(task)
    if row is None:
        raise unknown_task(task, str(journal.path))
    if row.status != TaskStatus.RUNNING and not running_here:
        answer = journal.answer(task)
        if answer is not None:
            return answer
    live = running_here or bool(journal.live_runs(task))
    return partial_answer(journal, row, live=live)


def shared_task_answer(url: str, task: str) -> dict[str, Any]:
    """The task's answer so far from a PostgreSQL journal: built from its calls while it runs."""
    from pooler.shared.answer import shared_answer_of  # noqa: PLC0415 - psycopg only when asked
    from pooler.shared.pg_journal import PgJournal  # noqa: PLC0415

    journal = PgJournal(url)
    try:
        row = journal.task(task)
        if row is None:
            raise unknown_task(task, journal.where())
        answer = shared_answer_of(journal, task) or journal.answer(task)
    finally:
        journal.close()
    if answer is None:
        raise InputError(f"task {task} has recorded no answer yet - ask again in a moment.")
    return answer
