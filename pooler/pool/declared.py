"""Tool declarations read from files, for ``pooler check --against`` without the store.

``--against`` takes a store (URL or name), a folder of a shop's exported declarations (one
``*.json`` per tool, either form of contract section 1), or a saved tool_list (``pooler tools
--json > shop-tools.json``). The files are read and checked as the reference store reads its
``--registry``; nothing is written and nothing is sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pooler.contract.declarations import load_folder, tool_of
from pooler.errors import InputError

SAVED = ("a saved tool_list ('pooler tools --json > shop-tools.json'), a folder of *.json "
         "declarations, or a store's URL or name")


def is_declarations(source: str) -> bool:
    """Whether ``--against`` names files rather than a store: an existing folder or file."""
    return "://" not in source and Path(source).expanduser().exists()


def load_declarations(source: str) -> list[dict[str, Any]]:
    """The tools the files declare, as tool_list lists them (``granted`` only where the file says)."""
    path = Path(source).expanduser()
    if path.is_dir():
        tools = load_folder(path)
        if not tools:
            raise InputError(f"--against {source}: the folder holds no *.json tool declarations - give "
                             f"{SAVED}", file=str(path))
        return [t.listed() for t in tools]
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"--against {source} is not JSON: {exc.msg} - give {SAVED}", file=str(path),
                         line=exc.lineno, column=exc.colno) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read --against {source}: {exc}", file=str(path)) from None
    raw, where = _tools_in(doc)
    if raw is None:
        raise InputError(f"--against {source} holds no tools: expected tool_list's "
                         '{"result": true, "tools": [...]} (what \'pooler tools --json\' prints), its '
                         f"envelope, a list of declarations or one declaration - give {SAVED}",
                         file=str(path))
    listed: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        try:
            tool = tool_of(item, path)
        except InputError as exc:
            # The declaration's place in the file, so a person finds which tool is wrong.
            raise InputError(f"{where}[{i}].{exc.message}", file=str(path),
                             path=f"{where}[{i}].{exc.problem.path or ''}".rstrip(".")) from None
        listed.append(_with_grants(tool.listed(), item))
    return listed


def _tools_in(doc: Any) -> tuple[list[Any] | None, str]:
    """The list of declarations in a saved document, and where it sits in it."""
    if isinstance(doc, list):
        return doc, "tools"
    if not isinstance(doc, dict):
        return None, ""
    if isinstance(doc.get("tools"), list):
        return doc["tools"], "tools"
    data = doc.get("data")
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        return data["tools"], "data.tools"
    if "commands" in doc:
        return [doc], "tools"
    return None, ""


def _with_grants(listed: dict[str, Any], raw: Any) -> dict[str, Any]:
    """The grants a saved tool_list recorded for the token it was taken with."""
    granted = {str(c.get("name", "")).lower(): c["granted"] for c in raw.get("commands", [])
               if isinstance(c, dict) and isinstance(c.get("granted"), bool)}
    for command in listed["commands"]:
        if command["name"].lower() in granted:
            command["granted"] = granted[command["name"].lower()]
    return listed
