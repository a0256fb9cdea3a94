"""The registry of AI tools: their JSON declarations, read from ``tools/`` and ``--registry`` folders.

A declaration is the format of a Melbis store's ``ai_tools/tools/*.json`` export (contract section
1, read by ``pooler.contract.declarations``). The store's own tools are declared the same way as any
other; their code is the module of the same name in ``pooler.store.tools``. A declaration in a
``--registry`` folder for a unit the store already has replaces the built-in one (the module stays
the store's): the registry declares, the module does.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pooler.contract.declarations import Tool, load_folder
from pooler.errors import InputError

BUILTIN_DIR = Path(__file__).parent / "tools"


class Registry:
    """The tools in the order they were declared: the store's own first, then the folders'."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self._tools[tool.unit] = tool

    def find(self, unit: str) -> Tool | None:
        return self._tools.get(unit.upper())

    def tools(self) -> list[Tool]:
        return list(self._tools.values())


def load_registry(extra_dirs: Iterable[Path] = ()) -> Registry:
    """The store's own declarations, then every ``*.json`` of ``extra_dirs``; raises ``InputError``."""
    tools = {t.unit: t for t in load_folder(BUILTIN_DIR)}
    for folder in extra_dirs:
        if not folder.is_dir():
            raise InputError(f"--registry {folder} is not a folder - pass a folder of *.json declarations",
                             file=str(folder))
        for tool in load_folder(folder):
            tools[tool.unit] = tool
    return Registry(tools.values())


