"""Positions of a parsed file, told from the parser's marks only when asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pooler.pool.model import JsonPath, Pos

MarksOf = Callable[[], dict[JsonPath, Any]]


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
