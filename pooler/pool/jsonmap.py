"""One walk over a JSON value that rewrites its strings, shared by templates and references."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def map_strings(value: Any, fill: Callable[[str], Any]) -> Any:
    """``value`` with every string ``s`` (not mapping keys) replaced by ``fill(s)``.

    Containers are copied only where something changed: a value with nothing to fill costs one
    walk and no copies, which matters for thousands of calls with large params.
    """
    if isinstance(value, str):
        return fill(value)
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            new = map_strings(v, fill)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if isinstance(value, list):
        items: list[Any] | None = None
        for i, v in enumerate(value):
            new = map_strings(v, fill)
            if new is not v:
                if items is None:
                    items = list(value)
                items[i] = new
        return value if items is None else items
    return value
