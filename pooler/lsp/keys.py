"""The keys a pool file's mappings take, with their descriptions, from the published schema
(schemas/pool.schema.json): what the editor offers where a key is typed and shows over one."""

from __future__ import annotations

from typing import Any

from pooler.pool.schema_problems import pool_schema

Node = dict[str, Any]


def keys_at(path: tuple[str | int, ...]) -> dict[str, str]:
    """The keys of the mapping at ``path`` (``()`` the top, ``("pool", 0)`` a step,
    ``("pool", 0, "retry")`` its retry...) and their descriptions; none where the schema names none
    (a step's ``params`` are the command's: the declarations tell them)."""
    node = _walk(path)
    if node is None:
        return {}
    return {name: _description(spec) for name, spec in _properties(node).items() if name != "$schema"}


def description_of(path: tuple[str | int, ...], key: str) -> str | None:
    """What the schema says of ``key`` in the mapping at ``path``, if it names it."""
    return keys_at(path).get(key)


def _walk(path: tuple[str | int, ...]) -> Node | None:
    schema = pool_schema()
    node: Node | None = schema
    for part in path:
        if node is None:
            return None
        node = _resolve(node)
        if isinstance(part, int):
            items = node.get("items")
            node = items if isinstance(items, dict) else None
            continue
        props = _properties(node)
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
            if node.get("$ref") == "#/$defs/variable":
                node = schema["$defs"]["variable_declaration"]
        else:
            return None
    return _resolve(node) if node is not None else None


def _resolve(node: Node) -> Node:
    seen = 0
    while "$ref" in node and seen < 16:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        node = pool_schema()["$defs"].get(name, {})
        seen += 1
    return node


def _properties(node: Node) -> dict[str, Node]:
    found: dict[str, Node] = {}
    node = _resolve(node)
    if isinstance(node.get("properties"), dict):
        found.update({k: v for k, v in node["properties"].items() if isinstance(v, dict)})
    return found


def _description(spec: Node) -> str:
    text = spec.get("description")
    if isinstance(text, str):
        return text
    return str(_resolve(spec).get("description", ""))
