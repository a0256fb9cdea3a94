"""Checks of a tool call's arguments that the SDK leaves to the server, and the folder rule for paths.

The seeds' own refusals (params, files, into, pool...) belong to callargs and the loader; what is
here comes before them: names the tool does not take, values of the wrong kind, and relative paths
that climb out of the store folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pooler.errors import InputError, did_you_mean
from pooler.mcp.schemas import argument_names
from pooler.pool.rows import json_kind

#: A task id goes into the Idempotency-Key as ``<task>:<key>``, so it holds no colon.
TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")

_KINDS: dict[type, str] = {str: "a string", bool: "true or false", int: "a whole number",
                          dict: "an object"}


def check_names(tool: str, arguments: Mapping[str, Any]) -> None:
    """Refuse an argument the tool does not take, with the closest name it does."""
    allowed = argument_names(tool)
    for name in arguments:
        if name not in allowed:
            raise InputError(
                f"{tool} takes no argument [{name}]{did_you_mean(name, allowed)} - "
                f"it takes: {', '.join(allowed)}."
            )


def optional(arguments: Mapping[str, Any], name: str, kind: type, tool: str) -> Any:
    """The argument's value, or None when it is absent or null (null counts as unnamed)."""
    value = arguments.get(name)
    if value is None:
        return None
    # bool is an int in Python, but true is not a number of steps.
    wrong = not isinstance(value, kind) or (kind is int and isinstance(value, bool))
    if wrong:
        raise InputError(f"{name} of {tool} is {_KINDS.get(kind, kind.__name__)}, not {json_kind(value)} "
                         f"- see the input schema of {tool} in the tool list.")
    return value


def required_name(arguments: Mapping[str, Any], name: str, tool: str, example: str, hint: str) -> str:
    """``unit`` or ``command``: present, a non-empty string (the seed's ``… is required`` refusal)."""
    value = arguments.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InputError(f"{name} is required - {hint}, for example {example}.")
    if not isinstance(value, str):
        raise InputError(f"{name} of {tool} is a string, not {json_kind(value)} - {hint}, "
                         f"for example {example}.")
    return value


def check_task(value: str, session_task: str) -> str:
    """A task id the journal and the Idempotency-Key can carry."""
    if not TASK_ID.fullmatch(value):
        raise InputError(
            f"task is a bare id of letters, digits, '_', '-' and '.', at most 100 characters, not {value!r} "
            f"- leave it out to use this session's task {session_task}."
        )
    return value


def confine(value: Any, out: Path, what: str) -> None:
    """Refuse a relative path that leads out of the store folder; absolute paths are the caller's choice.

    Only the words of the path are looked at: the file may not exist yet, and the seed's own
    ``No such file`` refusal is the reader's to give.
    """
    if not isinstance(value, str) or not value:
        return
    if Path(value).is_absolute():
        return
    normal = os.path.normpath(value)
    if normal == ".." or normal.startswith(".." + os.sep):
        raise InputError(
            f"{what} {value} leads out of the store folder {out} - give a path inside that folder, "
            "or an absolute path."
        )
