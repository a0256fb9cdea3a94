"""``tool_pool {"task": T}``: what a task has done so far, from the journal, sending nothing.

An agent whose call timed out on its side, or whose connection dropped, asks this instead of
calling again: the answer tells what landed, what failed and what is in doubt.  A finished task
gives the answer its run recorded; a task still running gives the calls recorded so far (the ones
sent without an answer yet are in doubt, with ``status: running``); a task whose run died gives
its partial answer, as ``pooler show`` does.
"""

from __future__ import annotations

from pooler.errors import InputError
from pooler.journal.api import TaskView
from pooler.journal.documents import Answer


def unknown_task(task: str, where: str) -> InputError:
    return InputError(f"no task {task} in the journal {where} - a task is named in every tool_pool answer "
                      "(task); give one of those, or start the pool with tool_pool.")


def task_answer(view: TaskView, task: str, *, running_here: bool = False) -> Answer:
    """The task's answer so far, from any journal; ``running_here``: this process runs it now."""
    if view.task(task) is None:
        raise unknown_task(task, view.where())
    answer = view.answer(task, live=True, running_here=running_here)
    if answer is None:
        raise InputError(f"task {task} has recorded no answer yet - ask again in a moment.")
    return answer
