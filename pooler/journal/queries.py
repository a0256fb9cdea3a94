"""A backend's queries, kept as SQL in its ``sql/queries.sql``: each one under a ``-- name: NAME``
line, read once when the backend is imported, so the SQL is read and reviewed as SQL, beside the
migrations that make the tables it reads."""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.M)
#: Where a query takes in another of the file whole (``{{claim_state}}``): two reads made one
#: statement keep each one's SQL in one place.
_TAKEN_IN = re.compile(r"\{\{(\w+)\}\}")


def read_queries(path: Path) -> dict[str, str]:
    """The named queries of ``path``; a name given twice is an error of the file."""
    text = path.read_text(encoding="utf-8")
    parts = _NAME.split(text)
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise RuntimeError(f"{path}: the query {name} is named twice")
        # Comments stay in the file: a query is its statement alone, without a trailing ``;``.
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        found[name] = " ".join(" ".join(lines).split()).rstrip(";")
    return {name: _TAKEN_IN.sub(lambda m: found[m.group(1)], sql) for name, sql in found.items()}
