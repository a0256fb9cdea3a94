"""Keeps secret values (the token, secret variables) out of everything pooler writes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import islice
from typing import Any

MASK = "***"


class Redactor:
    """Replaces every known secret string with ``***`` in text and in JSON values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        #: Whether every secret is written in JSON as it is (no quote, backslash or control
        #: character): then a value whose JSON text lacks every secret holds none in any string.
        self._plain = True
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        # Very short values would mask ordinary words; they are still never printed on purpose.
        if secret and len(secret) >= 3 and secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=len, reverse=True)
            self._plain = self._plain and json.dumps(secret, ensure_ascii=False)[1:-1] == secret

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

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
