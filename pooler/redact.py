"""Keeps secret values (the token, secret variables) out of everything pooler writes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MASK = "***"


class Redactor:
    """Replaces every known secret string with ``***`` in text and in JSON values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        # Very short values would mask ordinary words; they are still never printed on purpose.
        if secret and len(secret) >= 3 and secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def value(self, value: Any) -> Any:
        """A copy of a JSON value with secrets masked in every string, keys included."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value
