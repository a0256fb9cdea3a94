"""Reading a YAML or JSON file once: its text, its value, and where every value stood.

JSON files are parsed with ``json`` (JSON semantics) and composed with the YAML parser for
positions only: JSON is YAML for where things stand.  YAML is read by ``pooler.pool.positions``.
The YAML parser is loaded when a YAML file is read or a JSON file's positions are asked for: a
run of a JSON pool that is right starts without it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pooler.errors import InputError
from pooler.infile import open_input
from pooler.pool.marks import (
    KEY,
    MAX_DEPTH,
    MAX_NODES,
    LazyPositions,
    duplicate_message,
    line_text,
    node_error,
    too_deep,
)
from pooler.pool.model import JsonPath, Source

if TYPE_CHECKING:
    from yaml.nodes import Node

MAX_BYTES = 16 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"


@dataclass
class Document:
    """A parsed file: its value and where every part of it stood."""

    value: Any
    source: Source


def _read_capped(handle: BinaryIO, max_bytes: int) -> bytes | None:
    """The whole stream, or ``None`` once it passes ``max_bytes``.

    Read in blocks: ``read(max_bytes + 1)`` would allocate the whole cap for every small file.
    """
    blocks: list[bytes] = []
    total = 0
    while block := handle.read(1 << 20):
        total += len(block)
        if total > max_bytes:
            return None
        blocks.append(block)
    return b"".join(blocks)


def read_text(path: Path, display: str, *, max_bytes: int = MAX_BYTES) -> str:
    """The file's text: utf-8 (a BOM is dropped), no zero byte, not over ``max_bytes``."""
    try:
        with open_input(path, display) as handle:
            raw = _read_capped(handle, max_bytes)
    except OSError as exc:
        raise InputError(f"{display} cannot be read: {exc.strerror or exc} - check its permissions.",
                         file=display) from None
    except ValueError:  # a zero byte in the name: no file can have it
        shown = display.replace("\x00", "\\0")
        raise InputError(f"No such file: {shown} - a file name holds no zero byte.", file=shown) from None
    if raw is None:
        raise InputError(f"{display} is larger than {_size(max_bytes)} - split it into smaller files.",
                         file=display)
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _line_col(raw[: exc.start].decode("utf-8"), None)
        raise InputError(f"{display} is not utf-8 text - save it in utf-8.", file=display,
                         line=line, column=column) from None
    _no_zero_byte(text, display)
    return text


def _no_zero_byte(text: str, display: str) -> None:
    zero = text.find("\x00")
    if zero >= 0:
        # Valid utf-8, but no YAML or JSON text may hold it: say what and where, not the encoding.
        line, column = _line_col(text, zero)
        raise InputError(f"{display} holds a NUL character (a zero byte) at line {line}, column {column} - "
                         "YAML and JSON do not allow it; remove it.", file=display, line=line, column=column)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit:,} bytes"


def _line_col(text: str, index: int | None) -> tuple[int, int]:
    end = len(text) if index is None else index
    start = text.rfind("\n", 0, end) + 1
    return text.count("\n", 0, end) + 1, end - start + 1


def looks_like_json(text: str) -> bool:
    """Text that opens with ``{`` or ``[``."""
    return text.lstrip()[:1] in ("{", "[")


def parse_text(text: str, file: str, *, as_json: bool | None = None, max_depth: int = MAX_DEPTH,
               max_nodes: int = MAX_NODES) -> Document:
    """Parse YAML or JSON text, recording positions.  Raises ``InputError`` with line and column.

    ``as_json`` None tells by the text: an opening ``{``/``[`` is tried as JSON first and, when it
    is not JSON, read as YAML (a YAML flow mapping opens the same way); when it is neither, the
    JSON error is the one told.
    """
    if as_json or (as_json is None and looks_like_json(text)):
        try:
            return _parse_json(text, file, max_depth)
        except InputError as json_error:
            if as_json:
                raise
            try:
                return _parse_yaml(text, file, max_depth, max_nodes)
            except InputError:
                raise json_error from None
    return _parse_yaml(text, file, max_depth, max_nodes)


def _parse_yaml(text: str, file: str, max_depth: int, max_nodes: int) -> Document:
    from pooler.pool import streamed  # noqa: PLC0415 - the YAML parser, for YAML alone
    from pooler.pool.positions import build, compose  # noqa: PLC0415

    source = Source(file=file, lines=text.splitlines())
    if "*" not in text:
        # No alias can be in it: read from the parser's events, with no node graph held.
        done, value = streamed.parse(text, source, max_depth=max_depth, max_nodes=max_nodes)
        if done:
            return Document(value, source)
    root = compose(text, source)
    if root is None:
        return Document(None, source)
    value = build(root, source, max_depth=max_depth, max_nodes=max_nodes, has_aliases="*" in text)
    return Document(value, source)


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON can carry - write a real number, or text in quotes.")


def _parse_json(text: str, file: str, max_depth: int) -> Document:
    source = Source(file=file, lines=text.splitlines())
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"{file} is not whole json - line {exc.lineno} column {exc.colno}: {exc.msg}; "
                         "fix the JSON there (is the file cut off?)",
                         file=file, line=exc.lineno, column=exc.colno,
                         source_line=line_text(source, exc.lineno)) from None
    except _DuplicateKeyError as exc:
        raise _duplicate(exc.key, text, source) from None
    except RecursionError:
        raise too_deep(source, None, max_depth) from None
    except ValueError as exc:
        raise InputError(f"{file} is not whole json - {exc}", file=file) from None

    def marks() -> dict[JsonPath, Any]:
        from pooler.pool.positions import compose_quietly  # noqa: PLC0415 - a problem asks where

        root = compose_quietly(text)
        return marks_of(root, max_depth) if root is not None else {}

    source.positions = LazyPositions(marks)
    _check_depth(value, source, max_depth)
    return Document(value, source)


def _duplicate(key: str, text: str, source: Source) -> InputError:
    from pooler.pool.positions import compose_quietly  # noqa: PLC0415 - a refusal tells where

    root = compose_quietly(text)
    found = find_duplicate(root, key) if root is not None else None
    if found is None:
        return InputError(f"Duplicate key [{key}] - a mapping holds each key once.", file=source.file)
    return node_error(source, duplicate_message(key, found[0]), found[1])


def _check_depth(value: Any, source: Source, max_depth: int) -> None:
    stack: list[tuple[Any, JsonPath]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) >= max_depth:
            raise too_deep(source, source.pos(path), max_depth)
        if isinstance(item, dict):
            stack.extend((v, (*path, k)) for k, v in item.items() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(item) if isinstance(v, dict | list))


def read_document(path: Path, display: str, *, as_json: bool | None = None,
                  max_bytes: int = MAX_BYTES) -> Document:
    """Read a file once and parse it; a ``.json`` name means JSON, else the text tells."""
    return parse_document(read_text(path, display, max_bytes=max_bytes), path, display, as_json=as_json)


def parse_document(text: str, path: Path, display: str, *, as_json: bool | None = None) -> Document:
    """A file's text parsed as ``read_document`` parses it (also the text an editor holds, unsaved,
    which is refused as the file would be)."""
    _no_zero_byte(text, display)
    text = text.removeprefix("\ufeff")
    if as_json is None and path.suffix.lower() == ".json":
        as_json = True
    return parse_text(text, display, as_json=as_json)


def marks_of(root: Node, max_depth: int = MAX_DEPTH) -> dict[JsonPath, Any]:
    """Every path's mark, values and keys (for JSON, whose values come from ``json``)."""
    from yaml.nodes import MappingNode, SequenceNode  # noqa: PLC0415 - loaded by the graph it walks

    marks: dict[JsonPath, Any] = {}
    stack: list[tuple[Node, JsonPath, int]] = [(root, (), 1)]
    while stack:
        node, path, depth = stack.pop()
        marks[path] = node.start_mark
        if depth > max_depth:
            continue
        if isinstance(node, SequenceNode):
            stack.extend((item, (*path, i), depth + 1) for i, item in enumerate(node.value))
        elif isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                member = (*path, str(key_node.value))
                key_at = (*member, KEY)
                marks[key_at] = key_node.start_mark
                stack.append((value_node, member, depth + 1))
    return marks


def find_duplicate(root: Node, key: str) -> tuple[Node, Node] | None:
    """The first and the second key node of a duplicated ``key`` anywhere in the graph."""
    from yaml.nodes import MappingNode, SequenceNode  # noqa: PLC0415 - loaded by the graph it walks

    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, MappingNode):
            seen: dict[str, Node] = {}
            for key_node, value_node in node.value:
                name = str(key_node.value)
                if name == key and name in seen:
                    return seen[name], key_node
                seen[name] = key_node
                stack.append(value_node)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)
    return None
