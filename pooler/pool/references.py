"""References to earlier steps: a params string that is wholly ``@name.field[.deeper...]``.

The seed's rule (tool_pool.md, "A Reference to a Step"): the string is replaced with
``detail.field...`` of the earlier step of that name (case not told apart), keeping the value's
type; the path goes deeper through objects and into lists by index from zero.  A string whose
name belongs to no earlier step is a word of data and goes as it is.  ``@@...`` is the escape for
a literal ``@...`` (the checks read strings by the same rule).

Each part of the path names a field of an object as it is (``*``, ``$`` and ``a b`` are names,
never syntax), or, when it is a number, an item of a list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pooler.errors import PoolerError
from pooler.pool.model import JsonPath

#: What a reference looks like: ``@`` + a name without a dot + ``.`` + the path in the detail.
_REF = re.compile(r"@([^.@][^.]*)\.(.*)", re.DOTALL)
_INDEX = re.compile(r"0|[1-9][0-9]*")


#: The most field names a message lists of a detail (a wide detail is cut with a count).
SHOWN_FIELDS = 12


class RefMissing(PoolerError):
    """A reference names a field that the detail of its step does not have.

    The message says where the reference stands (``at``: file:line:column), which fields the
    detail has where the path went astray, and the reference that was probably meant.
    """

    def __init__(self, name: str, path: str, *, detail: Any = None, at: str = "") -> None:
        # The seed's sentence word for word, then what helps to fix it.
        text = f"@{name}.{path} names a field the detail of that step does not have."
        if detail is not None:
            text += _what_it_has(name, path, detail)
        super().__init__(f"{at}: {text}" if at else text)
        self.name = name
        self.ref_path = path


def _what_it_has(name: str, path: str, detail: Any) -> str:
    """`` The detail has id, row - did you mean @name.row.sku?``, for the level the path left."""
    parts = path.split(".")
    value: Any = detail
    walked: list[str] = []
    for part in parts:
        if isinstance(value, dict) and part in value:
            value, walked = value[part], [*walked, part]
        elif isinstance(value, list) and _INDEX.fullmatch(part) and int(part) < len(value):
            value, walked = value[int(part)], [*walked, part]
        else:
            break
    where = "The detail" if not walked else f"{'.'.join(walked)} in the detail"
    if isinstance(value, dict) and value:
        names = [str(k) for k in value]
        shown = ", ".join(names[:SHOWN_FIELDS])
        more = f" and {len(names) - SHOWN_FIELDS} more" if len(names) > SHOWN_FIELDS else ""
        text = f" {where} has {shown}{more}"
    elif isinstance(value, list):
        text = f" {where} is a list of {len(value)}"
    else:
        text = f" {where} has no fields"
    meant = _meant(detail, parts)
    return f"{text} - did you mean @{name}.{meant}?" if meant else f"{text}."


def _meant(detail: Any, parts: list[str]) -> str:
    """The path in ``detail`` most like ``parts``: one that ends in the same field (a level was
    left out), else the closest field name at the level where the path went astray."""
    import difflib  # noqa: PLC0415 - only a reference that misses needs it

    paths = list(_paths(detail, (), 3))
    ending = sorted((len(p), p) for p in paths if p[-len(parts):] == tuple(parts) and len(p) > len(parts))
    if ending:
        return ".".join(ending[0][1])
    texts = {".".join(p): p for p in paths}
    close = difflib.get_close_matches(".".join(parts), list(texts), n=1, cutoff=0.6)
    return close[0] if close else ""


def _paths(value: Any, head: tuple[str, ...], depth: int) -> Iterator[tuple[str, ...]]:
    """Every path of fields in ``value`` to ``depth`` levels (lists by their first item only)."""
    if depth == 0:
        return
    if isinstance(value, dict):
        for key, item in list(value.items())[:200]:
            here = (*head, str(key))
            yield here
            yield from _paths(item, here, depth - 1)
    elif isinstance(value, list) and value:
        yield from _paths(value[0], (*head, "0"), depth - 1)


class RefUnavailable(PoolerError):
    """A reference names an earlier step that has no detail (it failed or did not run)."""

    def __init__(self, name: str, path: str) -> None:
        super().__init__(
            f"@{name}.{path} refers to step {name}, which has not completed - "
            "run the pool again once that step succeeds."
        )
        self.name = name
        self.ref_path = path


@dataclass(frozen=True)
class Ref:
    """One reference found in params: the step ``name`` as written, the ``path`` in its detail,
    and ``where`` it stands in params."""

    name: str
    path: str
    where: JsonPath

    @property
    def key(self) -> str:
        """The step name as steps are compared: case not told apart."""
        return self.name.lower()

    @property
    def text(self) -> str:
        return f"@{self.name}.{self.path}"


def parse_ref(text: str) -> tuple[str, str] | None:
    """``(name, path)`` when ``text`` has the form of a reference (``@@`` escapes excluded)."""
    if not text.startswith("@") or text.startswith("@@"):
        return None
    found = _REF.fullmatch(text)
    if found is None:
        return None
    return found.group(1), found.group(2)


def unescape(text: str) -> str:
    """``@@word`` is the literal ``@word``; every other string stays as it is."""
    return text[1:] if text.startswith("@@") else text


def find_refs(params: Any) -> list[Ref]:
    """Every string in ``params`` (at any depth, lists included) that has the form of a reference."""
    return list(_walk_refs(params, ()))


def _walk_refs(value: Any, where: JsonPath) -> Iterator[Ref]:
    if isinstance(value, str):
        parsed = parse_ref(value)
        if parsed is not None:
            yield Ref(parsed[0], parsed[1], where)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk_refs(v, (*where, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk_refs(v, (*where, i))


def lookup(detail: Any, name: str, path: str, at: str | Callable[[], str] = "") -> Any:
    """The value at ``path`` in ``detail``; ``RefMissing`` (told at ``at``, or at what ``at``
    gives, asked only then) when there is none.

    A numeric part is an index into a list and a field name in an object (a store may send a list
    as an object keyed ``"0"``, ``"1"``...): each part is read by what it meets.
    """
    value = detail
    for field, index in compiled_path(path):
        if isinstance(value, dict) and field in value:
            value = value[field]
        elif isinstance(value, list) and index is not None and index < len(value):
            value = value[index]
        else:
            raise RefMissing(name, path, detail=detail, at=at() if callable(at) else at)
    return value


@functools.lru_cache(maxsize=4096)
def compiled_path(path: str) -> tuple[tuple[str, int | None], ...]:
    """Each part of a reference's path: its field name, and its list index when it is a number
    (split once per path: a step over rows reads the same few paths for every call)."""
    return tuple((part, int(part) if _INDEX.fullmatch(part) else None) for part in path.split("."))
