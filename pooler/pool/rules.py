"""The rules of a pool's words, each written once: the checks, the client, the MCP schemas and the
published JSON Schema all take them from here (tests/test_rules.py keeps the JSON file in step).

A rule is a pattern (for editors and schema validators) together with the function that gives the
refusal in words, so what the schema accepts and what pooler accepts cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

#: ``into``: the bare name of a job, one word that becomes part of a file name under ``--out``.
INTO_PATTERN = "^[A-Za-z0-9_-]+$"
MAX_INTO = 64
#: A step's name: ``@name.field`` reads everything after the first dot as the path in the detail.
NAME_PATTERN = "^[^.]*$"
#: A variable's name (``${name}``) and the environment variable a declaration reads.
VARIABLE_PATTERN = "^[A-Za-z_][A-Za-z0-9_]*$"
#: ``max_concurrency``: calls at once in parallel mode, 1 to this.
MAX_CONCURRENCY = 16
#: ``serialize_on``: a dotted path into params.
DOTTED_PATTERN = "^[^.]+(\\.[^.]+)*$"

#: Names ``${...}`` uses for something else: no step and no variable may take one, whatever its
#: case (``Row`` too).  Written as a pattern of either case, since a JSON Schema pattern has no flags.
RESERVED = ("env", "pool", "row", "rows", "secret", "task", "var", "vars")
RESERVED_PATTERN = "^(" + "|".join("".join(f"[{c.upper()}{c}]" for c in word) for word in RESERVED) + ")$"
#: ``${env.NAME}`` in a string: a pool reads the environment only through a declared variable
#: (``$${`` is a literal ``${`` and is not one).
ENV_TEMPLATE_PATTERN = "(^|[^$])\\$\\{\\s*env\\."

#: A ``${`` that is never closed (``$${`` is a literal ``${``).
UNCLOSED_PATTERN = "(^|[^$])\\$\\{[^}]*$"
#: A key with a ``${row...}``: each row of a step over rows has a key of its own.
ROW_TEMPLATE_PATTERN = "\\$\\{\\s*row(\\s*\\}|\\.)"
#: A data file's name that tells its format (``format`` may tell it instead).
FORMAT_NAME_PATTERN = "[^/]\\.([Cc][Ss][Vv]|[Jj][Ss][Oo][Nn][Ll]?|[Nn][Dd][Jj][Ss][Oo][Nn])$"

_INTO = re.compile(INTO_PATTERN)
_INTO_FIX = "write one word with no path and no dots, like photos."


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", int: "a number", float: "a number"}.get(type(value), "a value")


def into_problem(into: Any, *, in_pool: bool = False) -> str | None:
    """What is wrong with an ``into``, or None when it is the bare name of a job.

    tool_run's words quote the name as Python does; a pool file's check shows it in brackets and
    keeps its one sentence for a path, a dot or a space.
    """
    if isinstance(into, str) and len(into) <= MAX_INTO and _INTO.fullmatch(into):
        return None
    head = "into is the bare name of a job - "
    if not isinstance(into, str):
        return f"{head}it is {_kind(into)}; {_INTO_FIX}"
    if not into:
        return f"{head}it is empty; {_INTO_FIX}"
    shown = f"[{into}]" if in_pool else repr(into)
    if len(into) > MAX_INTO:
        cut = f"[{into[:20]}]" if in_pool else repr(into[:20])
        return f"{head}{cut}... is {len(into)} characters long; keep it to {MAX_INTO}."
    if in_pool and any(ch in "/\\:." or ch.isspace() for ch in into):
        return f"{head}{shown} holds a path, a dot or a space; write one word, like photos."
    if "/" in into or "\\" in into or ":" in into:
        return f"{head}{shown} holds a path; {_INTO_FIX}"
    if "." in into:
        return f"{head}{shown} holds a dot; {_INTO_FIX}"
    bad = next(ch for ch in into if not _INTO.fullmatch(ch))
    return f"{head}{shown} holds {bad!r}; use only letters, digits, _ and -."


def jsonl_files(params: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(field, file)`` for every params value written ``{"file": "<path>.jsonl"}``."""
    for name, value in params.items():
        if (isinstance(value, dict) and len(value) == 1 and isinstance(value.get("file"), str)
                and value["file"].lower().endswith(".jsonl")):
            yield name, value["file"]
