"""Positions of a parsed file, told from the parser's marks only when asked for, and the refusals
that point at one.

Without the YAML parser: a JSON pool is read with ``json`` and needs the parser only for the
positions of a problem (``pooler.pool.positions``, loaded then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from pooler.errors import InputError
from pooler.pool.model import JsonPath, Pos, Source

MarksOf = Callable[[], dict[JsonPath, Any]]

MAX_DEPTH = 64
MAX_NODES = 1_000_000

KEY = "<key>"
"""The last part of the path under which a mapping member's key position is recorded."""


class Marked(Protocol):
    """What a refusal can point at: a node, or an event of a file read without its node graph."""

    start_mark: Any


def line_text(source: Source, line: int | None) -> str | None:
    """The text of a 1-based line of the source, if it has one."""
    return source.lines[line - 1] if line is not None and 0 < line <= len(source.lines) else None


def too_deep(source: Source, where: Pos | None, limit: int = MAX_DEPTH) -> InputError:
    """The refusal of a document nested deeper than ``limit``."""
    return InputError(
        f"the file nests deeper than {limit} levels - a pool needs only a few; flatten the data.",
        file=source.file, line=where.line if where else None, column=where.column if where else None,
        source_line=line_text(source, where.line) if where else None,
    )


def within_bounds(source: Source, at: Marked, *, visits: int, max_nodes: int, depth: int,
                  max_depth: int) -> None:
    """The bounds every reader of a YAML file keeps, whether it builds from nodes or from events:
    at most ``max_nodes`` values, nested at most ``max_depth`` deep."""
    if visits > max_nodes:
        raise node_error(source, f"the file holds more than {max_nodes:,} values - split it into smaller "
                         "files.", at)
    if depth > max_depth:
        raise too_deep(source, Pos(at.start_mark.line + 1, at.start_mark.column + 1), max_depth)


def node_error(source: Source, message: str, node: Marked) -> InputError:
    """An ``InputError`` pointing at a node."""
    line, column = node.start_mark.line + 1, node.start_mark.column + 1
    return InputError(message, file=source.file, line=line, column=column,
                      source_line=line_text(source, line))


def duplicate_message(key: str, first: Marked) -> str:
    return (f"Duplicate key [{key}] - the first is on line {first.start_mark.line + 1}; "
            "a mapping holds each key once.")


class LazyPositions(dict[JsonPath, Pos]):
    """Positions told from the parser's marks only when asked for: a valid file of 10,000 steps
    never needs them, and a problem needs a handful.

    ``marks_of`` gives every path's mark (an object with 0-based ``line`` and ``column``); it is
    called once, on the first question.  A position set explicitly wins over the marks.
    """

    def __init__(self, marks_of: MarksOf | Iterable[tuple[JsonPath, Pos]] = ()) -> None:
        # Built from pairs too, as copy and dataclasses.asdict rebuild a dict: then nothing is lazy.
        if callable(marks_of):
            super().__init__()
            self._marks_of: MarksOf | None = marks_of
        else:
            super().__init__(marks_of)
            self._marks_of = None
        self._marks: dict[JsonPath, Any] = {}
        self._aliases: dict[JsonPath, JsonPath] = {}

    def alias(self, key: JsonPath, same_as: JsonPath) -> None:
        """Tell ``key``'s position as that of ``same_as`` (values read from another file), lazily."""
        self._aliases[key] = same_as

    def _all_marks(self) -> dict[JsonPath, Any]:
        if self._marks_of is not None:
            marks_of, self._marks_of = self._marks_of, None
            self._marks = marks_of()
        return self._marks

    def _told(self, key: JsonPath) -> Pos | None:
        if dict.__contains__(self, key):
            found: Pos = dict.__getitem__(self, key)
            return found
        if key in self._aliases:
            return self._told(self._aliases[key])
        mark = self._all_marks().get(key)
        if mark is None:
            return None
        where = Pos(mark.line + 1, mark.column + 1)
        dict.__setitem__(self, key, where)
        return where

    def _materialize(self) -> None:
        for key in [*self._all_marks(), *self._aliases]:
            self._told(key)

    def get(self, key: JsonPath, default: Any = None) -> Any:
        found = self._told(key)
        return default if found is None else found

    def __getitem__(self, key: JsonPath) -> Pos:
        found = self._told(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self._aliases or key in self._all_marks()

    def __iter__(self) -> Iterator[JsonPath]:
        self._materialize()
        return super().__iter__()

    def __len__(self) -> int:
        self._materialize()
        return super().__len__()

    def keys(self) -> Any:
        self._materialize()
        return super().keys()

    def items(self) -> Any:
        self._materialize()
        return super().items()

    def values(self) -> Any:
        self._materialize()
        return super().values()

    def __reduce__(self) -> Any:
        # A copy or a pickle holds every position, as a plain dict.
        return (dict, (dict(self.items()),))
