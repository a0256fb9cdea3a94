"""What the cursor stands in, read from the text as it is typed (a half-typed file does not parse):
the mapping it writes a key of, the key whose value it writes, a reference or a template it is in.

The mapping's path comes from the indentation of the lines above (YAML's block style); flow
mappings on the cursor's line (``params: {name: Euro, |``) are read too, and a JSON file's path
from its brackets.  Which step the cursor is in
comes from the positions of the last loaded pool (``steps.py``), which JSON files have as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: A line's key: its indentation, an optional ``- `` and the key (bare or quoted).
_KEY_LINE = re.compile(r"""^(?P<indent>\s*)(?P<dash>-\s+)?["']?(?P<key>[\w$.\-]+)["']?\s*:(?:\s|$)""")
_DASH_ONLY = re.compile(r"^(?P<indent>\s*)-(\s|$)")
_TYPING_KEY = re.compile(r"""^(?P<indent>\s*)(?P<dash>-\s+)?["']?(?P<word>[\w\-]*)$""")
_ROW = re.compile(r"\$\{row\.([\w\-]*)$")
_VAR = re.compile(r"\$\{([\w]*)$")
_REF_FIELD = re.compile(r"""(?:^|[\s"'\[{,:])@([\w\-]+)\.([\w.\-]*)$""")
_REF = re.compile(r"""(?:^|[\s"'\[{,:])@([\w\-]*)$""")
_VALUE = re.compile(r"""(?:^|[\s{,])["']?(?P<key>[\w\-]+)["']?\s*:\s*["']?(?P<word>[\w\-]*)$""")
_FLOW_KEY = re.compile(r"""["']?(?P<key>[\w\-]+)["']?\s*:\s*\{(?P<inside>[^{}]*)$""")


@dataclass(frozen=True)
class Spot:
    """Where the cursor is.  ``kind``: ``key`` (a key of the mapping at ``path``), ``value`` (of
    ``key``), ``ref`` (an ``@`` step name), ``ref_field`` (a field of ``ref``'s detail), ``row`` (a
    column of the step's data file), ``var`` (a declared variable); ``word`` is what is typed of it."""

    kind: str
    word: str = ""
    path: tuple[str | int, ...] = ()
    key: str = ""
    ref: str = ""


def spot_at(lines: list[str], line: int, char: int) -> Spot | None:
    """The cursor's spot at 0-based ``line`` and ``char``; None where nothing is completed."""
    text = lines[line] if 0 <= line < len(lines) else ""
    prefix = text[:char]
    for pattern, kind in ((_ROW, "row"), (_VAR, "var")):
        found = pattern.search(prefix)
        if found:
            return Spot(kind, found.group(1))
    field = _REF_FIELD.search(prefix)
    if field:
        return Spot("ref_field", field.group(2), ref=field.group(1))
    ref = _REF.search(prefix)
    if ref:
        return Spot("ref", ref.group(1))
    if "\n".join(lines).lstrip().startswith("{"):
        return json_spot("\n".join([*lines[:line], prefix]))
    flow = _FLOW_KEY.search(_blanked(prefix))
    if flow is not None:
        inside = re.split(r",", flow.group("inside"))[-1]
        path = (*_line_path(lines, line, text), flow.group("key"))
        if ":" not in inside:
            return Spot("key", inside.strip().strip("\"'"), path=path)
        value = _VALUE.search(inside)
        return Spot("value", value.group("word"), path=path, key=value.group("key")) if value else None
    typing = _TYPING_KEY.match(prefix)
    if typing is not None:
        column = len(typing.group("indent")) + len(typing.group("dash") or "")
        if typing.group("dash"):
            parent = path_at(lines, line, len(typing.group("indent")), items=True)
            return Spot("key", typing.group("word"), path=(*parent, _item_index(lines, line)))
        return Spot("key", typing.group("word"), path=path_at(lines, line, column))
    value = _VALUE.search(prefix)
    if value is not None:
        return Spot("value", value.group("word"), path=_line_path(lines, line, text), key=value.group("key"))
    return None


def _blanked(text: str) -> str:
    """A closed template holds braces of its own: blanked, they do not open or close a mapping."""
    return re.sub(r"\$\{[^}]*\}", lambda m: "_" * len(m.group()), text)


def key_path(lines: list[str], row: int, char: int) -> tuple[str | int, ...]:
    """The path of the mapping a key starting at ``char`` on line ``row`` belongs to."""
    if "\n".join(lines).lstrip().startswith("{"):
        found = json_spot("\n".join([*lines[:row], lines[row][:char]]))
        return found.path if found is not None else ()
    text = lines[row] if 0 <= row < len(lines) else ""
    flow = _FLOW_KEY.search(_blanked(text[:char]))
    if flow is not None:
        return (*_line_path(lines, row, text), flow.group("key"))
    return _line_path(lines, row, text)


def _line_path(lines: list[str], row: int, text: str) -> tuple[str | int, ...]:
    """The path of the mapping the key on line ``row`` belongs to (an item's, after ``- ``)."""
    found = _KEY_LINE.match(text)
    indent = len(text) - len(text.lstrip())
    if found is not None and found.group("dash"):
        return (*path_at(lines, row, indent, items=True), _item_index(lines, row))
    return path_at(lines, row, indent)


def path_at(lines: list[str], row: int, column: int, *, items: bool = False) -> tuple[str | int, ...]:
    """The path of the mapping whose keys start at ``column`` on line ``row``, from the lines above
    (``items``: of the list whose ``- `` stand there, which may stand under its key's column)."""
    for up in range(row - 1, -1, -1):
        text = lines[up]
        stripped = text.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        indent = len(text) - len(text.lstrip())
        key = _KEY_LINE.match(text)
        if _DASH_ONLY.match(text):
            rest = text[indent + 1:]
            item_col = indent + 1 + len(rest) - len(rest.lstrip()) if rest.strip() else indent + 2
            if column <= indent:
                continue
            item = (*path_at(lines, up, indent, items=True), _item_index(lines, up))
            if column <= item_col or key is None:
                return item
            return (*item, key.group("key"))
        if key is not None and (indent < column or (items and indent == column
                                                      and not text[key.end():].strip())):
            return (*path_at(lines, up, indent), key.group("key"))
    return ()


def _item_index(lines: list[str], row: int) -> int:
    """Which item of its list the ``- `` on line ``row`` starts, from 0."""
    dash = _DASH_ONLY.match(lines[row])
    col = len(dash.group("indent")) if dash else 0
    index = 0
    for up in range(row - 1, -1, -1):
        text = lines[up]
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        indent = len(text) - len(text.lstrip())
        if indent < col:
            break
        if indent == col and _DASH_ONLY.match(text):
            index += 1
        elif indent == col:
            break
    return index


def json_spot(before: str) -> Spot | None:
    """The spot at the end of ``before``, the text of a JSON file up to the cursor: the path of
    the object or list the cursor is in, from its brackets (strings skipped)."""
    stack: list[list[Any]] = []  # [kind, key or index, after the key's colon]
    text, in_string, escaped, last = "", False, False, ""
    for char in before:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string, last = False, text
            else:
                text += char
            continue
        if char == '"':
            in_string, text = True, ""
        elif char in "{[":
            stack.append(["obj", None, False] if char == "{" else ["arr", 0, False])
        elif char in "}]" and stack:
            stack.pop()
        elif char == ":" and stack and stack[-1][0] == "obj":
            stack[-1][1], stack[-1][2] = last, True
        elif char == "," and stack:
            if stack[-1][0] == "arr":
                stack[-1][1] += 1
            else:
                stack[-1][1], stack[-1][2] = None, False
    if not stack or stack[-1][0] != "obj":
        return None
    path = tuple(entry[1] for entry in stack[:-1])
    word = text if in_string else ""
    if stack[-1][2]:
        return Spot("value", word, path=path, key=str(stack[-1][1]))
    return Spot("key", word, path=path)


def word_at(text: str, char: int) -> tuple[str, int]:
    """The token under ``char`` (a key, a word, ``@ref.field`` or ``${row.x}``) and where it starts."""
    for found in re.finditer(r"\$\{[^}]*\}|@@?[\w\-.]+|[\w\-.]+", text):
        if found.start() <= char <= found.end():
            return found.group(), found.start()
    return "", char
