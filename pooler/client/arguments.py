"""tool_run's client side: what the caller's machine does with a call before the store sees it.

params_source and files_source are read here, attachments' files are found, ``into`` is checked,
and a jsonl field written ``{"file": "rows.jsonl"}`` is read into its list of rows.  Every refusal
is an ``InputError`` whose message starts with tool_run's own text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pooler.client.http import Attachment
from pooler.errors import InputError
from pooler.pool.rows import iter_rows, json_kind, open_file
from pooler.pool.rules import into_problem, jsonl_files

#: params_source, files_source and jsonl field files are read whole; beyond this they are refused.
MAX_SOURCE_BYTES = 64 * 1024 * 1024
_FIELDS_EXAMPLE = '{"field": value, ...}'
_ENTRY_EXAMPLE = '{"file": "photos/1.jpg", "entity": "store", "elem_id": 1532}'


@dataclass
class CallArgs:
    """A call's arguments as they go to the store, and ``into``, which stays on this machine."""

    params: dict[str, Any]
    files: list[Attachment]
    into: str | None
    debug: bool


def prepare_call(*, params: Any = None, params_source: str | None = None, files: Any = None,
                 files_source: str | None = None, into: str | None = None, debug: bool = False,
                 base: Path, max_source_bytes: int = MAX_SOURCE_BYTES) -> CallArgs:
    """Apply tool_run's client-side refusals and read what the call names on this machine.

    ``None`` means "not named": ``params={}`` together with ``params_source`` is refused like any
    other pair.  Relative paths are relative to ``base``.  Fields whose value is null are dropped.
    """
    if params is not None and params_source is not None:
        raise InputError(
            "params or params_source, not both - write the fields in params or in the file"
            " params_source names, and drop the other."
        )
    if files is not None and files_source is not None:
        raise InputError(
            "files or files_source, not both - list the attachments in files or in the file"
            " files_source names, and drop the other."
        )
    if params is not None and not isinstance(params, dict):
        raise InputError(
            f"params is an object of fields - write it as {_FIELDS_EXAMPLE}, not as {json_kind(params)}."
        )
    if files is not None and not isinstance(files, list):
        raise InputError(f"files is a list of entries - write it as [{_ENTRY_EXAMPLE}, ...],"
                         f" not as {json_kind(files)}.")
    check_into(into)
    if params_source is not None:
        src = _resolve(params_source, base)
        params = _read_source(src, max_source_bytes)
        if not isinstance(params, dict):
            raise InputError(
                f"{src} holds no object of fields - it holds {json_kind(params)};"
                f" write {_FIELDS_EXAMPLE}."
            )
    where = "files"
    if files_source is not None:
        src = _resolve(files_source, base)
        files = _read_source(src, max_source_bytes)
        where = str(src)
        if not isinstance(files, list):
            raise InputError(
                f"{src} holds no list of entries - it holds {json_kind(files)};"
                f" write [{_ENTRY_EXAMPLE}, ...]."
            )
    fields = {k: v for k, v in (params or {}).items() if v is not None}
    return CallArgs(
        params=read_jsonl_fields(fields, base, max_source_bytes=max_source_bytes),
        files=_attachments(files or [], where, base),
        into=into,
        debug=debug,
    )


def check_into(into: str | None) -> None:
    """Refuse an ``into`` that is not the bare name of a job (one word: no path, no dots)."""
    if into is None:
        return
    problem = into_problem(into)
    if problem is not None:
        raise InputError(problem)


def read_jsonl_fields(params: dict[str, Any], base: Path, *,
                      max_source_bytes: int = MAX_SOURCE_BYTES) -> dict[str, Any]:
    """The params with every value that is exactly ``{"file": "<path>.jsonl"}`` read into its rows.

    The file holds one JSON object a line; blank lines are skipped.  Other values pass unchanged.
    """
    out = dict(params)
    for name, file in jsonl_files(params):
        path = _resolve(file, base)
        _check_size(path, max_source_bytes)
        out[name] = list(iter_rows(path, "jsonl"))
    return out


def _resolve(name: str, base: Path) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else base / path


def _check_size(path: Path, limit: int) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputError(f"No such file: {path}") from None
    except OSError as exc:
        raise InputError(f"{path} cannot be read: {exc.strerror or exc} - check its permissions.") from None
    if path.is_dir():
        raise InputError(f"No such file: {path} - it is a folder; name a file.")
    if size > limit:
        raise _too_big(path, _size_text(size), limit)


def _too_big(path: Path, size: str, limit: int) -> InputError:
    return InputError(f"{path} is {size}, over the {_size_text(limit)} a file read whole may hold -"
                      " split it, or send its rows by a step over rows.")


def _size_text(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB".replace(".0 ", " ")
    return f"{size / (1024 * 1024):.1f} MB".replace(".0 ", " ")


def _read_source(path: Path, limit: int) -> Any:
    """A params_source or files_source file: utf-8 JSON text with no zero byte."""
    _check_size(path, limit)
    with open_file(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:  # it grew after the check
        raise _too_big(path, f"over {_size_text(limit)}", limit)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not utf-8 text - save it in utf-8.") from None
    zero = text.find("\x00")
    if zero >= 0:
        # Valid utf-8, but no JSON text may hold it: say what and where, not the encoding.
        line = text.count("\n", 0, zero) + 1
        column = zero - text.rfind("\n", 0, zero)
        raise InputError(f"{path} holds a NUL character (a zero byte) at line {line}, column {column} - "
                         "JSON does not allow it; remove it.")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} is not whole json - {exc.msg} at line {exc.lineno} column {exc.colno};"
            " it may be cut off: fix it or write it again whole."
        ) from None
    except RecursionError:
        raise InputError(f"{path} is not whole json - it is nested too deep; flatten it.") from None


def _attachments(entries: list[Any], where: str, base: Path) -> list[Attachment]:
    out: list[Attachment] = []
    for num, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise InputError(
                f"files is a list of entries - entry {num} of {where} is {json_kind(entry)};"
                f" write every entry as {_ENTRY_EXAMPLE}."
            )
        name = entry.get("file")
        if not isinstance(name, str) or not name.strip():
            has = "none" if name is None or name == "" else json_kind(name)
            raise InputError(
                f"Every entry needs file - a path on this machine. Entry {num} of {where} has {has}."
            )
        path = _resolve(name, base)
        if not path.exists():
            raise InputError(f"No such file: {path}")
        if path.is_dir():
            raise InputError(f"No such file: {path} - it is a folder; name a file.")
        out.append(Attachment(path=path, entry={k: v for k, v in entry.items() if k != "file"}))
    return out
