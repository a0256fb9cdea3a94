"""The store's tool declarations as the editor sees them: units, their commands, a command's fields
and detail, found by the names a pool writes (case not told apart, as the store does).

Where they come from is the command line's business (``--against`` at start, the client's
``initializationOptions``, a ``# pooler: against=...`` line): it hands the server a function that
fetches them, and they are kept per source while the server runs.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from pooler.errors import PoolerError

Tool = dict[str, Any]
Fetch = Callable[[str], list[Tool]]

#: ``# pooler: against=shop-tools.json`` in a pool file names its registry.
AGAINST_LINE = re.compile(r"^\s*(?://|#)\s*pooler:\s*against\s*=\s*(\S+)\s*$", re.MULTILINE)


def against_in(text: str) -> str | None:
    """The registry a pool file names for itself, if it names one."""
    found = AGAINST_LINE.search(text)
    return found.group(1) if found else None


class Registries:
    """The declarations of every source asked for, fetched once each for the server's life; a
    source that cannot be had is remembered with its error, which the server shows once."""

    def __init__(self, fetch: Fetch | None) -> None:
        self.fetch = fetch
        self._lock = threading.Lock()
        self._got: dict[str, list[Tool] | PoolerError] = {}

    def tools(self, source: str | None) -> list[Tool] | PoolerError | None:
        if source is None or self.fetch is None:
            return None
        with self._lock:
            if source not in self._got:
                try:
                    self._got[source] = self.fetch(source)
                except PoolerError as exc:
                    self._got[source] = exc
            return self._got[source]


class Declarations:
    """One registry's tools, looked up by the names a pool writes."""

    def __init__(self, tools: list[Tool] | None) -> None:
        self.list = [t for t in tools or [] if isinstance(t, dict)]
        self._units = {str(t.get("unit", "")).upper(): t for t in self.list}

    def unit(self, name: str) -> Tool | None:
        return self._units.get(name.strip().upper())

    def commands(self, unit: str) -> list[Tool]:
        tool = self.unit(unit)
        return [c for c in (tool or {}).get("commands", []) if isinstance(c, dict)]

    def command(self, unit: str, name: str) -> Tool | None:
        low = name.strip().lower()
        return next((c for c in self.commands(unit) if str(c.get("name", "")).lower() == low), None)

    def fields(self, unit: str, command: str) -> list[Tool]:
        found = self.command(unit, command)
        return [p for p in (found or {}).get("params", []) if isinstance(p, dict) and "name" in p]

    def field(self, unit: str, command: str, name: str) -> Tool | None:
        return next((p for p in self.fields(unit, command) if str(p["name"]) == name), None)

    def detail(self, unit: str, command: str) -> list[str]:
        """The detail fields the command declares (none when its declaration does not tell)."""
        # Imported here: the server answers initialize before the pool's checks are loaded.
        from pooler.pool.against import detail_fields  # noqa: PLC0415

        found = self.command(unit, command)
        return sorted(detail_fields(found) or ()) if found is not None else []


def field_text(param: Tool) -> str:
    """A field as a person reads it: ``name (type, required): description``."""
    need = "required" if param.get("required") else "optional"
    default = param.get("default")
    told = f", default {default}" if isinstance(default, str) and default else ""
    text = f"{param.get('name')} ({param.get('type', '?')}, {need}{told})"
    return f"{text}: {param['descr']}" if param.get("descr") else text
