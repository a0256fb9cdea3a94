"""A problem's "did you mean" as an edit: the wrong word at the problem's spot, and its replacement.

The checks write their guess into the message (``errors.did_you_mean``); this reads it back, so
the quick fix is the check's own guess and no rule is written twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pooler.errors import Problem

_GUESS = re.compile(r"[Dd]id you mean (\S+?)\?")
_BRACKET = re.compile(r"\[([^\[\]]+)\]")


@dataclass(frozen=True)
class Fix:
    """Replace ``wrong`` on 0-based ``line`` from ``char`` with ``right``."""

    line: int
    char: int
    wrong: str
    right: str

    @property
    def end(self) -> int:
        return self.char + len(self.wrong)


def fix_of(problem: Problem, lines: list[str]) -> Fix | None:
    """The edit a problem's guess makes at its spot, or None when it makes none there."""
    guess = _GUESS.search(problem.message)
    if guess is None or problem.line is None or problem.column is None:
        return None
    right = guess.group(1)
    wrong = _wrong_word(problem.message[: guess.start()], right)
    row = problem.line - 1
    if not wrong or not 0 <= row < len(lines):
        return None
    found = lines[row].find(wrong, problem.column - 1)
    if found < 0:
        return None
    return Fix(row, found, wrong, right)


def _wrong_word(before: str, right: str) -> str:
    """The word the guess replaces: the last ``[word]`` before the guess, else the message's first
    word (``${skuu}``, ``@curr.id``), cut to the part the guess stands for."""
    brackets = _BRACKET.findall(before)
    if brackets:
        return str(brackets[-1])
    words = before.split()
    wrong = words[0] if words else ""
    if wrong.startswith("${") and wrong.endswith("}") and not right.startswith("${"):
        return wrong[2:-1]
    if wrong.startswith("@") and not right.startswith("@"):
        # ``@cur.nmae names a field ... - did you mean name?``: the guess is the field.
        return wrong.split(".", 1)[1] if "." in wrong else wrong[1:]
    return wrong
