"""Refusals that mean the store is busy (``retry.refusals``): a text a refusal's message contains,
or a ``/regular expression/`` it matches.  A refusal proves the command was not carried out, so a
call refused so is safe to send again (under its key's next round: the store may keep the refusal
under the key it answered).  The check, the run and the MCP tool read the words here alike."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence


def _pattern(text: str) -> str | None:
    """The regular expression a ``/.../`` refusal writes, or None for a plain text."""
    if len(text) >= 2 and text.startswith("/") and text.endswith("/"):
        return text[1:-1]
    return None


def refusal_problem(text: str) -> str | None:
    """Why a refusal as written cannot be used, or None."""
    pattern = _pattern(text)
    if pattern is None:
        return None
    if not pattern:
        return (f"{text} is an empty regular expression - it would take every refusal for busy; "
                "write the text to look for.")
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"{text} is not a regular expression: {exc}."
    return None


def busy_refusal(refusals: Sequence[str]) -> Callable[[str], bool]:
    """Whether a refusal's message is one of ``refusals`` (checked already)."""
    texts = [t for t in refusals if _pattern(t) is None]
    patterns = [re.compile(p) for t in refusals if (p := _pattern(t))]

    def matches(message: str) -> bool:
        return any(t in message for t in texts) or any(p.search(message) for p in patterns)

    return matches
