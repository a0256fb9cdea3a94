"""Counts in words, one rule for every message: ``1 row``, ``2 rows``, ``30,000 calls``."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word``, the word in the plural (``many``, or ``word`` + s) unless it is 1."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"
