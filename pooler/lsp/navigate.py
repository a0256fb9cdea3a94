"""Hover and go to definition: what a unit, command, field, key, ``@ref``, ``${row.x}`` or
``${var}`` under the cursor is, and where a referenced step or a named file stands."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pooler.lsp.context import key_path, word_at
from pooler.lsp.keys import description_of
from pooler.lsp.registry import Declarations, field_text
from pooler.lsp.steps import data_file, data_path_of, first_values, step_at
from pooler.pool.model import Pool, Step

_KEY_OF_VALUE = re.compile(r"""["']?([\w\-]+)["']?\s*:\s*["']?$""")
_FILE_VALUE = re.compile(r"""["']?(pool_source|params_source|file)["']?\s*:\s*["']?([^"',}\s]+)""")


@dataclass(frozen=True)
class Target:
    """Where a definition is: a file, and a 0-based line with the characters it spans there."""

    file: str
    line: int = 0
    char: int = 0
    end: int = 0


def hover(lines: list[str], line: int, char: int, pool: Pool | None, decl: Declarations) -> str | None:
    """Markdown for the token under the cursor, or None when there is nothing to tell."""
    text = lines[line] if 0 <= line < len(lines) else ""
    token, start = word_at(text, char)
    if not token:
        return None
    step = step_at(pool, line, key_path(lines, line, start))
    if token.startswith("@") and not token.startswith("@@") and pool is not None:
        return _ref(token, pool, decl)
    if token.startswith("${row.") and token.endswith("}"):
        return _column(token[6:-1].split(".")[0], pool, step)
    if token.startswith("${") and token.endswith("}") and pool is not None:
        var = pool.variables.get(token[2:-1].split(".")[0])
        if var is None:
            return None
        told = f"default `{var.default}`" if var.has_default else "no default"
        env = f", from the environment variable `{var.env}`" if var.env else ""
        return f"**variable {var.name}**: {told}{env}\n\n{var.description}".rstrip()
    after = text[start + len(token):]
    if re.match(r"""["']?\s*:""", after):
        return _key(token, key_path(lines, line, start), step, decl)
    key = _KEY_OF_VALUE.search(text[:start])
    if key is not None and step is not None:
        return _value(key.group(1), token, step, decl)
    return None


def _ref(token: str, pool: Pool, decl: Declarations) -> str | None:
    name, _, field = token[1:].partition(".")
    target = pool.step_named(name)
    if target is None:
        return None
    text = f"**step {target.num} `{target.name}`**: {target.unit}.{target.command}"
    if target.description:
        text += f"\n\n{target.description}"
    detail = decl.detail(target.unit, target.command)
    if detail:
        text += f"\n\ndetail: {', '.join(detail)}" + (f" (this reads `{field}`)" if field else "")
    return text


def _column(column: str, pool: Pool | None, step: Step | None) -> str | None:
    data = data_file(pool, step)
    if data is None:
        return None
    if data.fields is not None and column not in data.fields:
        return f"`{data.path.name}` has no column `{column}`: {', '.join(data.fields)}"
    values = ", ".join(repr(v) for v in first_values(data, column))
    return f"**column `{column}`** of `{data.path.name}`\n\nfirst values: {values or 'none (no rows)'}"


def _key(key: str, path: tuple[str | int, ...], step: Step | None, decl: Declarations) -> str | None:
    if path[-1:] == ("params",):
        param = decl.field(step.unit, step.command, key) if step is not None else None
        if param is None or step is None:
            return None
        return f"**field of {step.unit}.{step.command}**\n\n{field_text(param)}"
    told = description_of(path, key)
    return f"**{key}**: {told}" if told else None


def _value(key: str, value: str, step: Step, decl: Declarations) -> str | None:
    if key == "unit":
        tool = decl.unit(value)
        if tool is None:
            return None
        names = ", ".join(str(c.get("name")) for c in decl.commands(value))
        return (f"**{tool.get('unit')}**: {tool.get('name', '')}\n\n{tool.get('descr', '')}\n\n"
                f"commands: {names}")
    if key == "command":
        command = decl.command(step.unit, value)
        if command is None:
            return None
        fields = "\n".join(f"- {field_text(p)}" for p in decl.fields(step.unit, value))
        return f"**{step.unit}.{command.get('name')}**: {command.get('descr', '')}\n\n{fields}".rstrip()
    return None


def definition(lines: list[str], line: int, char: int, pool: Pool | None) -> Target | None:
    """Where ``@name`` is defined (its step's ``name:``), or the file a ``pool_source``,
    ``params_source`` or data ``file`` names."""
    if pool is None:
        return None
    text = lines[line] if 0 <= line < len(lines) else ""
    token, _ = word_at(text, char)
    if token.startswith("@") and not token.startswith("@@"):
        target = pool.step_named(token[1:].split(".")[0])
        if target is None or target.source is None:
            return None
        pos = target.source.pos((*target.path, "name")) or target.source.pos(target.path)
        if pos is None:
            return None
        return Target(target.source.file, pos.line - 1, pos.column - 1, pos.column - 1 + len(target.name))
    for found in _FILE_VALUE.finditer(text):
        if found.start(2) <= char <= found.end(2):
            key, name = found.group(1), found.group(2)
            path = data_path_of(pool, name) if key == "file" else Path(pool.file).parent / name
            return Target(str(path)) if path.is_file() else None
    return None
