"""What a tool call of ``pooler mcp`` gives back, before it is dressed as an MCP result."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pooler import strictjson
from pooler.errors import Problem
from pooler.journal.documents import Answer
from pooler.redact import Redactor

if TYPE_CHECKING:
    from pooler.pool.compiler import Plan


@dataclass(frozen=True)
class Outcome:
    """The text for ``content``, the same object for ``structuredContent`` (when there is JSON), the mark."""

    text: str
    answer: Mapping[str, Any] | None = None
    is_error: bool = False

    def redacted(self, redactor: Redactor) -> Outcome:
        """The same outcome with every secret masked, in the text and in the object."""
        if not redactor:
            return self
        answer = redactor.value(self.answer) if self.answer is not None else None
        return Outcome(redactor.text(self.text), answer, self.is_error)


#: What notes join: a run's answer, or a plan's.
_Told = TypeVar("_Told", Answer, dict[str, Any])


def with_notes(answer: _Told, plan: Plan) -> _Told:
    """The answer with ``notes``: the references sent as text that nearly name a step (none: no
    field, so an answer without them is the seed's own)."""
    if plan.notes:
        answer["notes"] = [n.as_json() for n in plan.notes]
    return answer


def answered(answer: Mapping[str, Any], *, is_error: bool) -> Outcome:
    """A JSON answer: its text in ``content`` and the object itself beside it."""
    return Outcome(strictjson.dumps(answer, ensure_ascii=False), answer, is_error)


#: The fixes the engine's messages suggest name the command line; an agent has tools instead.
FOR_AN_AGENT: tuple[tuple[str, str], ...] = (
    ("`pooler call UNIT COMMAND --files-source FILE`", "a tool_run call (files or files_source)"),
    ("`pooler tools`", "tool_list"),
)


#: A pool file's variables come from pool_run's ``vars``, not from ``--var``.
VAR_FLAG = re.compile(r"--var ([A-Za-z_][A-Za-z0-9_]*)(=VALUE|:)")


def for_an_agent(text: str) -> str:
    for shell, tool in FOR_AN_AGENT:
        text = text.replace(shell, tool)
    return VAR_FLAG.sub(lambda m: f'vars {{"{m[1]}": "VALUE"}}' if m[2] == "=VALUE" else f"vars.{m[1]}:",
                        text)


def refused(text: str) -> Outcome:
    """A refusal as text, with no JSON: a store crash, or a refusal before anything was sent."""
    return Outcome(text, None, True)


def problem_text(problem: Problem) -> str:
    """One problem as an agent reads it; a problem in a file keeps its place and caret."""
    # A pool given inline has no lines to point at, and a file name before the message would only
    # push the seed's text away from the start of the line.
    return for_an_agent(problem.render() if problem.line is not None else problem.message)


def problems_text(problems: Sequence[Problem]) -> str:
    """Every problem on its own line."""
    return "\n".join(problem_text(p) for p in problems)
