"""YAML without aliases read straight from the parser's events, into the same JSON values as
``positions.build`` makes from nodes, with no node graph and no marks kept.

A node graph of a 15 MB pool file (180,000 steps) holds millions of nodes and marks at once; the
values alone are a fraction of that.  A file without aliases needs no graph: every value is built
as its events arrive, by the rules of ``positions._Builder`` (the core schema, ``<<`` merges, the
limits), and its positions are worked out again from the text only when a problem asks for one.
A file with aliases (``*name``) goes through the graph, which measures alias bombs first.
"""

from __future__ import annotations

import re
from sys import intern
from typing import Any, NamedTuple

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from pooler.errors import InputError
from pooler.pool.marks import KEY, LazyPositions, duplicate_message, node_error, too_deep, within_bounds
from pooler.pool.model import JsonPath, Source
from pooler.pool.positions import (
    _MAP,
    _MERGE,
    _PLAIN,
    _SEQ,
    _SPECIAL_START,
    _STR,
    _Builder,
    _Loader,
    _yaml_error,
    compose_quietly,
)

_NON_SPECIFIC = (None, "!")


#: Text up to this long is held once however often the file repeats it (a unit, a command, a key):
#: 180,000 steps naming one unit hold one string, not 180,000.
_SHORT = 64


#: Where ``str.splitlines`` splits and YAML sees no line break.
_NOT_YAML_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e]")


def _held(text: str) -> str:
    return intern(text) if len(text) <= _SHORT else text


class _Aliased(Exception):
    """The text holds an alias after all: it is read through the node graph."""


def parse(text: str, source: Source, *, max_depth: int, max_nodes: int) -> tuple[bool, Any]:
    """``(True, value)`` of the single document in ``text`` (None when it holds none), its
    positions left to ``source.positions`` (worked out from the text when asked); ``(False, None)``
    when the text holds an alias (then read it through the node graph).  ``InputError`` with line
    and column when it is not YAML or breaks a rule of the builder."""
    loader = _Loader(text)
    try:
        value = _Streamed(source, max_depth, max_nodes, loader).document()
    except _Aliased:
        return False, None
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, source) from None
    except yaml.YAMLError as exc:
        raise InputError(f"{source.file} is not valid YAML - {exc}", file=source.file) from None
    except RecursionError:
        raise too_deep(source, None) from None
    finally:
        loader.dispose()
    # The source's lines give the text again, unless it holds a character they split at and YAML
    # does not (a form feed): then the text itself is kept for it.
    kept = text if _NOT_YAML_BREAKS.search(text) else None
    source.positions = LazyPositions(lambda: _marks_again(kept, source, max_depth, max_nodes))
    return True, value


def _marks_again(text: str | None, source: Source, max_depth: int, max_nodes: int) -> dict[JsonPath, Any]:
    """Every path's mark, from the text parsed again (only when a problem asks for a position);
    ``text`` None: from the source's lines, so the text itself is not held meanwhile.  Each mark is
    kept as ``(line, column)``, read from the events as the values were: a 15 MB file with a problem
    holds its marks, never a node graph too."""
    text = text if text is not None else "\n".join(source.lines)
    if "<<" in text:
        # Merged members take the marks of the mapping they come from: the node graph tells them.
        root = compose_quietly(text)
        if root is None:
            return {}
        builder = _Builder(source, max_depth, max_nodes)
        builder.build(root, (), 1)
        return builder.marks
    marks: dict[JsonPath, Any] = {}
    loader = _Loader(text)
    try:
        loader.get_event()  # the stream's start
        if not loader.check_event(StreamEndEvent):
            loader.get_event()  # the document's start
            _walk(loader, (), marks)
    except yaml.YAMLError:
        pass  # the file was read once already: what was marked before the slip stands
    finally:
        loader.dispose()
    return marks


def _walk(loader: Any, path: JsonPath, marks: dict[JsonPath, Any]) -> None:
    """Mark the value whose events come next, and everything in it, under their paths."""
    event = loader.get_event()
    marks[path] = _At(event.start_mark.line, event.start_mark.column)
    if isinstance(event, SequenceStartEvent):
        index = 0
        while not loader.check_event(SequenceEndEvent):
            _walk(loader, (*path, index), marks)
            index += 1
        loader.get_event()
    elif isinstance(event, MappingStartEvent):
        while not loader.check_event(MappingEndEvent):
            key = loader.get_event()
            member = (*path, str(key.value))
            key_at = (*member, KEY)
            marks[key_at] = _At(key.start_mark.line, key.start_mark.column)
            _walk(loader, member, marks)
        loader.get_event()


class _At(NamedTuple):
    """A mark as ``LazyPositions`` reads it: 0-based line and column, and nothing more."""

    line: int
    column: int


class _Streamed(_Builder):
    """``_Builder``'s rules applied to events as they come."""

    def __init__(self, source: Source, max_depth: int, max_nodes: int, loader: Any) -> None:
        super().__init__(source, max_depth, max_nodes)
        self.loader = loader

    def document(self) -> Any:
        loader = self.loader
        loader.get_event()  # the stream's start
        if loader.check_event(StreamEndEvent):
            return None
        start = loader.get_event()  # the document's start
        value = self.value(1)
        loader.get_event()  # the document's end
        if not loader.check_event(StreamEndEvent):
            found = loader.get_event()
            raise yaml.composer.ComposerError("expected a single document in the stream", start.start_mark,
                                              "but found another document", found.start_mark)
        return value

    def value(self, depth: int) -> Any:
        event = self.loader.get_event()
        if isinstance(event, AliasEvent):
            raise _Aliased
        self.visits += 1
        within_bounds(self.source, event, visits=self.visits, max_nodes=self.max_nodes, depth=depth,
                      max_depth=self.max_depth)
        if isinstance(event, ScalarEvent):
            if event.tag in _NON_SPECIFIC:
                event.tag = _PLAIN if event.implicit[0] else _STR
            if event.tag == _PLAIN:
                text = event.value
                if text and text[0] not in _SPECIAL_START:
                    return _held(text)
            elif event.tag == _STR:
                return _held(event.value)
            return self.scalar(event)
        if isinstance(event, SequenceStartEvent):
            if event.tag not in (*_NON_SPECIFIC, _SEQ):
                raise self.bad_tag(event)
            items = []
            while not self.loader.check_event(SequenceEndEvent):
                items.append(self.value(depth + 1))
            self.loader.get_event()
            return items
        if isinstance(event, MappingStartEvent):
            if event.tag not in (*_NON_SPECIFIC, _MAP):
                raise self.bad_tag(event)
            return self.members(depth)
        raise self.bad_tag(event)  # pragma: no cover - the parser gives no other event here

    def members(self, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: dict[str, Any] = {}
        merges: list[tuple[Any, Any]] = []
        loader = self.loader
        while not loader.check_event(MappingEndEvent):
            key_event = loader.peek_event()
            if not isinstance(key_event, ScalarEvent):
                if isinstance(key_event, AliasEvent):
                    raise _Aliased
                raise node_error(self.source, "a key must be text, not a list or a mapping - write a plain "
                                 "key.", key_event)
            loader.get_event()
            plain = key_event.tag in _NON_SPECIFIC and key_event.implicit[0]
            if key_event.tag == _MERGE or (plain and key_event.value == "<<"):
                at = loader.peek_event()
                merges.append((at, self.value(depth + 1)))
                continue
            key = intern(str(key_event.value))
            first = seen.get(key)
            if first is not None:
                raise node_error(self.source, duplicate_message(key, first), key_event)
            seen[key] = key_event
            out[key] = self.value(depth + 1)
        loader.get_event()
        for at, merged in merges:
            # Keys written in the mapping itself win over merged ones, and earlier merges over later.
            for item in merged if isinstance(merged, list) else [merged]:
                if not isinstance(item, dict):
                    raise node_error(self.source, "<< merges mappings only - give it a mapping (*alias) or a "
                                     "list of them.", at)
                for key, value in item.items():
                    out.setdefault(key, value)
        return out
