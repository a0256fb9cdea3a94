"""Keeps secret values (the token, secret variables) out of everything pooler writes.

The rule, one place for all of pooler: a secret of ``ANYWHERE`` (12) characters or more is masked
wherever it appears, also inside a longer word (``Bearer%20<token>``); a shorter one is masked
where it stands as a whole word - not where a letter, digit or ``_`` goes on right before or after
it - so with the secret ``demo`` the text ``demo unit`` becomes ``*** unit`` and
``demonstration`` stays as it is.  A number in a JSON value equal to a secret number is masked
too, and a secret that is an object or a list is masked as each string and number in it.  Text
is masked first and cut after, and a cut text that ends in the first characters of a secret has
them masked as well.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import islice
from typing import Any

from pooler.plural import plural

MASK = "***"
#: A secret at least this long is masked wherever it appears; a shorter one only as a whole word.
ANYWHERE = 12
#: The fewest first characters of a secret that are masked at the end of a cut text.
_PARTIAL = 3


def secret_texts(value: Any) -> Iterator[str]:
    """The texts a secret value is masked as: a string itself, a number as JSON writes it, and
    every string and number inside an object or a list (true, false and null are no secret)."""
    if isinstance(value, str):
        if value:
            yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield json.dumps(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from secret_texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from secret_texts(item)


def short_warning(what: str, value: Any) -> str | None:
    """The warning for a secret too short to be masked anywhere (``what`` names it), or None.

    One number decides both: a secret shorter than ``ANYWHERE`` is masked only as a whole word, so
    it is the one worth a warning (a part of a longer word, ``Bearer%20<secret>x``, stays open)."""
    shortest = min((len(text) for text in secret_texts(value)), default=ANYWHERE)
    if shortest >= ANYWHERE:
        return None
    return (f"pooler: WARNING: {what} is {plural(shortest, 'character')} long - it is "
            f"masked as {MASK} only where it stands as a whole word, and so is the same word anywhere in "
            f"the store's data; a secret of {ANYWHERE} characters or more is masked wherever it appears.")


_WORD_CHAR = re.compile(r"\w")


@lru_cache(maxsize=256)
def _word(secret: str) -> re.Pattern[str]:
    """The secret where it stands as a whole word: no word character goes on across its edges."""
    before = r"(?<!\w)" if re.match(r"\w", secret[0]) else ""
    after = r"(?!\w)" if re.match(r"\w", secret[-1]) else ""
    return re.compile(before + re.escape(secret) + after)


def _starts_word(text: str, start: int) -> bool:
    """Whether a word may begin at ``start``: no word character goes on right before it."""
    return start == 0 or not (_WORD_CHAR.match(text, start) and _WORD_CHAR.match(text, start - 1))


class Redactor:
    """Replaces every known secret with ``***`` in text and in JSON values, by the rule above."""

    def __init__(self, secrets: Iterable[Any] = ()) -> None:
        self._secrets: list[str] = []
        self._known: set[str] = set()
        #: Whether every secret is written in JSON as it is (no quote, backslash or control
        #: character): then a value whose JSON text lacks every secret holds none in any string.
        self._plain = True
        #: Whether every secret is ASCII: then JSON written ASCII-only holds it as itself too.
        self._ascii = True
        for secret in secrets:
            self.add(secret)

    def add(self, secret: Any) -> None:
        """Mask ``secret`` from now on: a string, a number, or every string and number inside it."""
        for text in secret_texts(secret):
            if text in self._known:
                continue
            self._known.add(text)
            self._secrets.append(text)
            self._secrets.sort(key=len, reverse=True)
            self._plain = self._plain and json.dumps(text, ensure_ascii=False)[1:-1] == text
            self._ascii = self._ascii and text.isascii()

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def texts(self) -> tuple[str, ...]:
        """The texts masked: a text without any of them is left as it is (SQLite can look for them)."""
        return tuple(self._secrets)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret not in text:
                continue
            text = text.replace(secret, MASK) if len(secret) >= ANYWHERE else _word(secret).sub(MASK, text)
        return text

    def cut(self, text: str, limit: int, *, was_cut: bool = False) -> str:
        """``text`` masked, then cut to ``limit`` characters; when anything was cut (here, or
        before, as ``was_cut`` says) the first characters of a secret left at the end are masked."""
        masked = self.text(text)
        if len(masked) > limit:
            masked, was_cut = masked[:limit], True
        if not was_cut:
            return masked
        for secret in self._secrets:
            for size in range(len(secret) - 1, min(_PARTIAL, len(secret)) - 1, -1):
                start = len(masked) - size
                if masked.endswith(secret[:size]) and (len(secret) >= ANYWHERE
                                                       or _starts_word(masked, start)):
                    return masked[:start] + MASK
        return masked

    def value(self, value: Any) -> Any:
        """``value`` with secrets masked in every string, keys included.

        Copy on write: what holds no secret is returned as it is (the same object), and a dict or
        list is copied only when something inside it changed, so masking a large answer that has
        no secret in it costs no second copy of it.
        """
        if not self._secrets:
            return value
        if self._plain and isinstance(value, dict | list) and not self._in_json(value):
            return value
        return self._masked(value)

    def in_json_text(self, text: str) -> bool:
        """Whether the value whose JSON text (written ASCII-only or not) is ``text`` may hold a
        secret, as ``value`` first asks, from the text the caller has made already: a plain ASCII
        secret stands as itself in any JSON text; with any other, the value is looked at whole."""
        if not self._secrets:
            return False
        if not (self._plain and self._ascii):
            return True
        return any(secret in text for secret in self._secrets)

    def _in_json(self, value: Any) -> bool:
        """Whether a secret may be in ``value``: one pass of the C encoder instead of a walk in Python.

        JSON escapes character by character, so a string holding a plain secret holds it verbatim
        in its JSON text too; a match elsewhere (in a number) only sends the value the slow way.
        """
        try:
            text = json.dumps(value, ensure_ascii=False, check_circular=False)
        except (TypeError, ValueError, RecursionError):
            return True
        return any(secret in text for secret in self._secrets)

    def _masked(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return MASK if json.dumps(value) in self._known else value
        if isinstance(value, dict):
            return self._dict(value)
        if isinstance(value, list):
            return self._list(value)
        return value

    def _dict(self, value: dict[Any, Any]) -> dict[str, Any]:
        out: dict[str, Any] | None = None
        for index, (key, item) in enumerate(value.items()):
            # A key that is not a string becomes one, as JSON writes it.
            name = self.text(key) if isinstance(key, str) else self.text(str(key))
            masked = self._masked(item)
            if out is None:
                if name is key and masked is item:
                    continue
                out = dict(islice(value.items(), index))
            out[name] = masked
        return value if out is None else out

    def _list(self, value: list[Any]) -> list[Any]:
        out: list[Any] | None = None
        for index, item in enumerate(value):
            masked = self._masked(item)
            if out is None:
                if masked is item:
                    continue
                out = value[:index]
            out.append(masked)
        return value if out is None else out
