"""Any journal's tasks, opened from a ``--journal`` value (or ``POOLER_JOURNAL``) for reading, as
``pooler runs``, ``pooler show`` and ``tool_pool {"task": T}`` tell them (``TaskView``), and the
call history a task's report draws."""

from __future__ import annotations

from pooler.journal.api import CallHistory, TaskView
from pooler.journal.opening import open_existing
from pooler.run.taskanswer import WorkTasks


def open_tasks(spec: str) -> TaskView:
    """The tasks of the journal ``spec`` names: a missing SQLite file is refused, not made."""
    return WorkTasks(open_existing(spec))


def history_of(view: TaskView) -> CallHistory:
    """The call history behind ``view``, which a task's HTML report draws."""
    assert isinstance(view, WorkTasks)
    return view.journal.history()
