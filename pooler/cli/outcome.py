"""The JSON document of an outcome that has no answer of its own: a refusal, a lock, a store down.

``--json`` promises exactly one document on stdout whatever happens, so the CLI writes this one
when a command ends without having written its answer.
"""

from __future__ import annotations

from typing import Any

from pooler.errors import Problem

#: What each exit status means, as ``pooler --help`` says it; the document repeats it.
MEANINGS = {
    0: "done",
    1: "a step or call failed, or the store could not be reached",
    2: "refused before anything was sent",
    3: "another run of the pool file holds its lock; nothing was sent",
    70: "internal error (a bug in pooler)",
    130: "interrupted by SIGINT",
    143: "interrupted by SIGTERM",
}
STATUSES = {1: "failed", 2: "refused", 3: "locked", 70: "internal_error", 130: "interrupted",
            143: "interrupted"}


def problem_json(problem: Problem) -> dict[str, Any]:
    """A problem with every place it knows: file, line, column, step, path."""
    return {"message": problem.message, "file": problem.file, "line": problem.line,
            "column": problem.column, "step": problem.step, "path": problem.path}


def outcome_document(exit_status: int, problems: list[Problem]) -> dict[str, Any]:
    """``{"result": false, "status": "refused", "exit": 2, "exit_meaning": ..., "problems": [...]}``."""
    return {
        "result": exit_status == 0,
        "status": STATUSES.get(exit_status, "failed"),
        "exit": exit_status,
        "exit_meaning": MEANINGS.get(exit_status, ""),
        "message": problems[0].message if problems else MEANINGS.get(exit_status, ""),
        "problems": [problem_json(p) for p in problems],
    }
