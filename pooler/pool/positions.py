"""YAML read into JSON values while recording where every value stood.

The text is composed into nodes with libyaml when it is there (the safe C parser, never the unsafe
loader) and the values are built from the nodes here, so every value's line and column can be told
from ``Source.positions`` by its JSON path (``LazyPositions``: worked out from the parser's marks
only when a problem asks).  For a mapping member the position of the value is recorded under the
member's path, and the position of its key under ``path + ("<key>",)``, so an unknown key can be
pointed at itself.

Plain scalars are read by the YAML 1.2 core schema, the way JSON reads them: ``1e5`` is a number,
``yes``/``no``/``on``/``off`` and dates stay text.  Mapping keys are always text.  ``<<`` merges
mappings in, as in YAML 1.1.  The work is bounded: depth, and the number of values visited counting
every re-visit through an alias, so an alias bomb is refused before it is expanded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Protocol

import yaml
from yaml.events import ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pooler.errors import InputError
from pooler.pool.marks import (
    KEY,
    MAX_DEPTH,
    MAX_NODES,
    LazyPositions,
    Marked,
    duplicate_message,
    line_text,
    node_error,
    too_deep,
    within_bounds,
)
from pooler.pool.model import JsonPath, Pos, Source


class Tagged(Marked, Protocol):
    tag: Any


Scalar = ScalarNode | ScalarEvent

_PLAIN = "tag:pooler,2024:plain"
_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"
_EXPLICIT = frozenset({"tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
                       "tag:yaml.org,2002:float"})

_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_RADIX = re.compile(r"0o[0-7]+|0x[0-9a-fA-F]+")
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_NOT_FINITE = frozenset({".inf", "+.inf", "-.inf", ".nan"})
_NUMBER_START = frozenset("0123456789+-.")
_TAG_WORDS = {"int": "a whole number", "float": "a number", "bool": "true or false", "null": "null"}
_SPECIAL_START = frozenset("0123456789+-.~nNtTfF")


class _Resolver(yaml.resolver.Resolver):
    """Marks plain scalars instead of guessing their type the YAML 1.1 way."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and implicit[0]:
            return _PLAIN
        return yaml.resolver.Resolver.resolve(self, kind, value, implicit)  # type: ignore[no-untyped-call]


_CParser: Any = getattr(getattr(yaml, "cyaml", None), "CParser", None)
if _CParser is not None:  # pragma: no branch - libyaml is in every usual build

    class _Loader(_CParser, yaml.constructor.SafeConstructor, _Resolver):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            _Resolver.__init__(self)

else:  # pragma: no cover - only without libyaml

    class _Loader(  # type: ignore[no-redef]
        yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
        yaml.constructor.SafeConstructor, _Resolver,
    ):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            _Resolver.__init__(self)


def plain_scalar(text: str) -> Any:
    """A plain YAML scalar read by the core schema: null, true/false, a number, else the text.

    Raises ``ValueError`` for ``.inf``/``.nan``, which JSON cannot carry.
    """
    if text in _NULLS:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text and text[0] in _NUMBER_START:
        if _INT.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text):
            return float(text)
        if _RADIX.fullmatch(text):
            return int(text, 0)
        if text.lower() in _NOT_FINITE:
            raise ValueError(f"{text} is not a number JSON can carry - write a real number, "
                             "or text in quotes.")
    return text


def compose(text: str, source: Source) -> Node | None:
    """The text's node graph; ``InputError`` with line and column when it is not YAML."""
    try:
        node: Node | None = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, source) from None
    except yaml.YAMLError as exc:
        raise InputError(f"{source.file} is not valid YAML - {exc}", file=source.file) from None
    except RecursionError:
        raise too_deep(source, None) from None
    return node


def compose_quietly(text: str) -> Node | None:
    """The node graph, or None when the YAML parser cannot read the text."""
    try:
        node: Node | None = yaml.compose(text, Loader=_Loader)
    except (yaml.YAMLError, RecursionError):
        return None
    return node


def build(root: Node, source: Source, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES,
          has_aliases: bool = True) -> Any:
    """The JSON value of a node graph; ``source.positions`` becomes lazy, filled from the marks."""
    if has_aliases:
        _measure(root, source, max_depth, max_nodes)
    builder = _Builder(source, max_depth, max_nodes)
    value = builder.build(root, (), 1)
    marks = builder.marks
    source.positions = LazyPositions(lambda: marks)
    return value


def _yaml_error(exc: yaml.MarkedYAMLError, source: Source) -> InputError:
    mark = exc.problem_mark or exc.context_mark
    where = Pos(mark.line + 1, mark.column + 1) if mark else None
    problem = exc.problem or "cannot be read"
    if "nesting depth" in problem:
        return too_deep(source, where)
    text = line_text(source, where.line) if where else None
    if text is not None and where is not None and "\t" in text[: len(text) - len(text.lstrip())]:
        message = "a tab indents this line - YAML indents with spaces only; replace the tab with spaces."
    elif text is not None and where is not None and text[where.column - 1: where.column] in RESERVED_STARTS:
        message = _reserved_start(text[where.column - 1:])
    else:
        said = f"{exc.context}, {problem}" if exc.context else problem
        message = f"not valid YAML: {said} - fix the syntax at this spot."
    return InputError(message, file=source.file, line=where.line if where else None,
                      column=where.column if where else None, source_line=text)


#: Characters YAML keeps for itself: a plain value cannot start with one (a reference ``@cur.id``).
RESERVED_STARTS = frozenset("@`")
_PLAIN_END = re.compile(r"\s+#|,\s|[,}\]]\s*$|[}\]]|\s*$")


def _reserved_start(rest: str) -> str:
    """The refusal of a plain value that starts with ``@`` or a backtick, with its quoted form."""
    end = _PLAIN_END.search(rest, 1)
    value = rest[: end.start() if end else len(rest)].rstrip()
    return (f"a YAML value that starts with {rest[0]} must be quoted (YAML keeps {rest[0]} for itself): "
            f"write {json.dumps(value, ensure_ascii=False)}.")


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, SequenceNode):
        yield from node.value


def _measure(root: Node, source: Source, max_depth: int, max_nodes: int) -> None:
    """Refuse alias loops and alias bombs before anything is built: sizes are memoized per node."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Node, depth: int) -> int:
        ident = id(node)
        known = sizes.get(ident)
        if known is not None:
            return known
        if ident in open_nodes:
            raise node_error(source, "an alias refers to a value that holds it - a pool file cannot hold "
                             "a loop; write the value out.", node)
        if depth > max_depth:
            raise too_deep(source, Pos(node.start_mark.line + 1, node.start_mark.column + 1), max_depth)
        total = 1
        open_nodes.add(ident)
        for child in _children(node):
            total += size(child, depth + 1)
            if total > max_nodes:
                raise node_error(source, f"the file expands to more than {max_nodes:,} values through "
                                 "aliases (&anchor and *alias) - write it without such repetition.", node)
        open_nodes.discard(ident)
        sizes[ident] = total
        return total

    size(root, 1)


class _Builder:
    """Builds JSON values from nodes, recording positions and counting every visit."""

    def __init__(self, source: Source, max_depth: int, max_nodes: int) -> None:
        self.source = source
        self.marks: dict[JsonPath, Any] = {}
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.visits = 0

    def build(self, node: Node, path: JsonPath, depth: int) -> Any:
        self.visits += 1
        within_bounds(self.source, node, visits=self.visits, max_nodes=self.max_nodes, depth=depth,
                      max_depth=self.max_depth)
        self.marks[path] = node.start_mark
        if isinstance(node, ScalarNode):
            if node.tag == _PLAIN:
                value = node.value
                # Most plain scalars are words: only a few first characters can start anything else.
                if value and value[0] not in _SPECIAL_START:
                    return value
            elif node.tag == _STR:
                return node.value
            return self.scalar(node)
        if isinstance(node, SequenceNode) and node.tag == _SEQ:
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        if isinstance(node, MappingNode) and node.tag == _MAP:
            return self.mapping(node, path, depth)
        raise self.bad_tag(node)

    def scalar(self, node: Scalar) -> Any:
        tag = node.tag
        if tag == _PLAIN:
            try:
                return plain_scalar(node.value)
            except ValueError as exc:
                raise node_error(self.source, str(exc), node) from None
        if tag == _STR:
            return node.value
        if tag in _EXPLICIT:
            return self.explicit(node)
        raise self.bad_tag(node)

    def explicit(self, node: Scalar) -> Any:
        """``!!int``, ``!!float``, ``!!bool``, ``!!null``: the core schema's reading, of that kind."""
        kind = str(node.tag).rsplit(":", 1)[-1]
        try:
            value = plain_scalar(node.value.strip())
        except ValueError as exc:
            raise node_error(self.source, str(exc), node) from None
        if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        wanted = {"int": int, "float": float, "bool": bool, "null": type(None)}[kind]
        if type(value) is not wanted:
            said = _TAG_WORDS[kind]
            raise node_error(self.source, f"!!{kind} {node.value!r} is not {said} - fix the value or drop "
                             "the tag.", node)
        return value

    def bad_tag(self, node: Tagged) -> InputError:
        tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
        return node_error(self.source, f"the tag {tag} is not supported - a pool file holds JSON values "
                          "only: text, numbers, true/false, null, lists and mappings.", node)

    def key_text(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            raise node_error(self.source, "a key must be text, not a list or a mapping - write a plain key.",
                             node)
        return str(node.value)

    def mapping(self, node: MappingNode, path: JsonPath, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: dict[str, Node] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE or (key_node.tag == _PLAIN and key_node.value == "<<"):
                merges.append(value_node)
                continue
            key = self.key_text(key_node)
            first = seen.get(key)
            if first is not None:
                raise node_error(self.source, duplicate_message(key, first), key_node)
            seen[key] = key_node
            member = (*path, key)
            key_at = (*member, KEY)
            self.marks[key_at] = key_node.start_mark
            out[key] = self.build(value_node, member, depth + 1)
        for merged in merges:
            self.merge(out, merged, path, depth)
        return out

    def merge(self, out: dict[str, Any], node: Node, path: JsonPath, depth: int) -> None:
        # Keys written in the mapping itself win over merged ones, and earlier merges over later.
        items = node.value if isinstance(node, SequenceNode) else [node]
        for item in items:
            if not isinstance(item, MappingNode):
                raise node_error(self.source, "<< merges mappings only - give it a mapping (*alias) or a "
                                 "list of them.", item)
            for key_node, value_node in item.value:
                key = self.key_text(key_node)
                if key not in out:
                    out[key] = self.build(value_node, (*path, key), depth + 1)
