"""The errors pooler raises on purpose.

Every error carries where it happened (file, line, column, step, path) as fields, so the CLI can
point at the spot with a caret without reopening the file, and a message that says how to fix it.
Anything that is not a ``PoolerError`` is a bug.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, and where it is.

    ``line`` and ``column`` are 1-based.  ``source_line`` is the text of that line, captured when
    the file was loaded, so rendering never reads the file again.
    """

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    step: int | None = None
    path: str | None = None
    source_line: str | None = None

    def location(self) -> str:
        """``file:line:column`` as far as it is known, or ``""``."""
        parts = [p for p in (self.file, self.line, self.column) if p is not None]
        return ":".join(str(p) for p in parts)

    def headline(self) -> str:
        """``file:line:column: message``, the one line a log or a JUnit report shows."""
        where = self.location()
        return f"{where}: {self.message}" if where else self.message

    def render(self) -> str:
        """The headline and, where the line is known, the line with a caret under the spot."""
        text = self.headline()
        if self.source_line is None or self.line is None:
            return text
        gutter = f"{self.line:>5} | "
        shown, column = quote_window(self.source_line.rstrip(), self.column or 1)
        caret_pad = " " * (len(gutter) - 2) + "| " + " " * max(column - 1, 0)
        return f"{text}\n{gutter}{shown}\n{caret_pad}^"


#: The most of a source line an error quotes: a longer line is shown as a window around the spot.
QUOTE_CHARS = 120


def quote_window(line: str, column: int) -> tuple[str, int]:
    """``line`` cut to ``QUOTE_CHARS`` around ``column`` (``...`` where it was cut), and the column
    of the same spot in what is shown."""
    if len(line) <= QUOTE_CHARS:
        return line, column
    start = max(0, min(column - 1 - QUOTE_CHARS // 2, len(line) - QUOTE_CHARS))
    end = start + QUOTE_CHARS
    head = "..." if start > 0 else ""
    tail = "..." if end < len(line) else ""
    return f"{head}{line[start:end]}{tail}", column - start + len(head)


class PoolerError(Exception):
    """Base of pooler's own errors: one clear message, with the spot it is about."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        step: int | None = None,
        path: str | None = None,
        source_line: str | None = None,
    ) -> None:
        super().__init__(message)
        self.problem = Problem(message, file, line, column, step, path, source_line)

    @property
    def message(self) -> str:
        return self.problem.message

    def problems(self) -> Sequence[Problem]:
        return [self.problem]

    def render(self) -> str:
        return "\n".join(p.render() for p in self.problems())


class UsageError(PoolerError):
    """The command line is wrong (a flag's value, a missing argument)."""


class InputError(PoolerError):
    """An input file is wrong: a pool, a params_source, a files_source, a data file, a vars file."""


class CheckFailed(InputError):
    """A pool failed its checks; every problem found is in ``problems()``, not only the first."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        found = list(problems)
        first = found[0] if found else Problem("the pool failed its checks")
        super().__init__(first.message, file=first.file, line=first.line, column=first.column,
                         step=first.step, path=first.path, source_line=first.source_line)
        self._problems = found or [first]

    def problems(self) -> Sequence[Problem]:
        return self._problems


class StoreError(PoolerError):
    """The store could not be reached or answered with something that is not an answer."""

    def __init__(self, message: str, *, store: str, sent: bool, kind: Any = None) -> None:
        super().__init__(message)
        self.store = store
        #: True when the request may have reached the store: its outcome is unknown (in doubt).
        self.sent = sent
        #: Its row of the table in ``answer_kinds`` (not sent, reset, cut off, timeout, too big).
        self.kind = kind


class UnvouchedError(PoolerError):
    """A check that could not be made (its ``--against`` store out of reach): it vouches for no file.

    Not a ``StoreError``: nothing was to be sent, so this is check's "not valid" (exit 2), the one
    status besides 0 that check's exit table lists - a CI gate must not read it as a failed run.
    """


class LockedError(PoolerError):
    """Another run of the same pool file holds its lock."""


class JournalError(PoolerError):
    """The journal cannot be opened or holds no such task."""


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` ``word`` is nearly (case told apart first, then not), or None."""
    import difflib  # noqa: PLC0415 - a refusal's suggestion alone needs it, not every start

    choices = list(choices)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
        close = [lowered[c] for c in close]
    if not close:
        # A short name is too short for the ratio ("ab" is 0.5 of "aa"): one slip of a key still counts.
        close = [c for c in choices if _one_edit(word.lower(), c.lower())][:1]
    return close[0] if close else None


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` by one character changed, added, dropped, or two swapped (a
    word of one character is close to nothing: any other would do)."""
    if a == b or abs(len(a) - len(b)) > 1 or min(len(a), len(b)) < 2:
        return False
    if len(a) == len(b):
        wrong = [i for i in range(len(a)) if a[i] != b[i]]
        return len(wrong) == 1 or (len(wrong) == 2 and wrong[1] == wrong[0] + 1
                                   and a[wrong[0]] == b[wrong[1]] and a[wrong[1]] == b[wrong[0]])
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` - did you mean X?`` for the closest of ``choices``, or ``""`` when none is close."""
    close = closest(word, choices)
    return f" - did you mean {close}?" if close is not None else ""


def in_order(problems: Iterable[Problem], main: str) -> list[Problem]:
    """How problems are told: the pool file's first, each file's by line and column (by step where
    there are no positions); the same problem once."""
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda p: (p.file != main, p.file or "", p.line or 0, p.column or 0,
                                         p.step or 0))
