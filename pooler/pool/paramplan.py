"""A step's params walked once when the run is planned: what is fixed stays as it is, and only the
strings that change per call (templates, references) are kept as small fill-in nodes.

At call time ``ParamsPlan.fill`` builds the params from those nodes; containers with nothing to
fill are shared, never copied.  The rules are those of ``values`` (templates) and ``refs``
(references, the ``@@`` escape): templates are filled in the pool file's own strings, references
are taken from the detail of an earlier step, and neither a row's data nor a detail's value is ever
read as a template or a reference.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pooler.pool.model import JsonPath, Step
from pooler.pool.references import RefUnavailable, compiled_path, lookup, parse_ref, unescape
from pooler.pool.variables import Piece, compile_template, fill_pieces


@dataclass(frozen=True)
class _Template:
    pieces: tuple[Piece, ...]
    #: The step's ``for_each.decimal``: a whole ``${row.x}`` that is wholly a number becomes it.
    decimal: str | None = None

    def fill(self, scope: Mapping[str, Any], details: Mapping[str, Any]) -> Any:
        return fill_pieces(self.pieces, scope, self.decimal)


@dataclass(frozen=True)
class _Reference:
    name: str
    path: str
    #: The step and the path below it where the reference stands: its ``file:line:column`` is
    #: worked out only for the message when it misses (finding it reads the whole file's
    #: positions, which a run whose references all hit never needs).
    step: Step | None = field(default=None, compare=False)
    where: JsonPath = ()

    def fill(self, scope: Mapping[str, Any], details: Mapping[str, Any]) -> Any:
        key = self.name.lower()
        if key not in details:
            raise RefUnavailable(self.name, self.path)
        return lookup(details[key], self.name, self.path, self.at)

    def at(self) -> str:
        """``file:line:column`` of the reference in the pool file ("" without its step)."""
        if self.step is None:
            return ""
        return self.step.problem("", "params", *self.where).location()


@dataclass(frozen=True)
class _Mapping:
    fixed: dict[Any, Any]
    filled: tuple[tuple[Any, Any], ...]

    def fill(self, scope: Mapping[str, Any], details: Mapping[str, Any]) -> Any:
        out = dict(self.fixed)
        for key, node in self.filled:
            out[key] = node.fill(scope, details)
        return out


@dataclass(frozen=True)
class _List:
    items: tuple[Any, ...]

    def fill(self, scope: Mapping[str, Any], details: Mapping[str, Any]) -> Any:
        return [item.fill(scope, details) if isinstance(item, _NODES) else item for item in self.items]


_NODES = (_Template, _Reference, _Mapping, _List)


def _compile(value: Any, known: Collection[str], step: Step | None = None, where: JsonPath = ()) -> Any:
    """The value itself when nothing in it changes per call, else its node."""
    if isinstance(value, str):
        parsed = parse_ref(value)
        if parsed is not None and parsed[0].lower() in known:
            compiled_path(parsed[1])  # built now, once, and cached for every call
            return _Reference(parsed[0], parsed[1], step, where)
        text = unescape(value)
        pieces = compile_template(text)
        decimal = step.for_each.decimal if step is not None and step.for_each is not None else None
        return text if pieces is None else _Template(pieces, decimal)
    if isinstance(value, dict):
        compiled = {k: _compile(v, known, step, (*where, str(k))) for k, v in value.items()}
        filled = tuple((k, v) for k, v in compiled.items() if isinstance(v, _NODES))
        if not filled:
            return value if all(compiled[k] is value[k] for k in value) else compiled
        return _Mapping({k: v for k, v in compiled.items() if not isinstance(v, _NODES)}, filled)
    if isinstance(value, list):
        items = [_compile(v, known, step, (*where, i)) for i, v in enumerate(value)]
        if any(isinstance(v, _NODES) for v in items):
            return _List(tuple(items))
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


@dataclass(frozen=True)
class ParamsPlan:
    """A step's params, ready to be filled per call."""

    root: Any
    #: Whether any string is filled per call (otherwise ``fill`` gives the same params each time).
    dynamic: bool

    def fill(self, scope: Mapping[str, Any], details: Mapping[str, Any]) -> dict[str, Any]:
        """The params of one call; ``InputError`` for a template naming nothing in ``scope``,
        ``RefMissing``/``RefUnavailable`` for a reference that cannot be filled."""
        if not self.dynamic:
            found: dict[str, Any] = self.root
            return found
        filled: dict[str, Any] = self.root.fill(scope, details)
        return filled

    def steps(self) -> frozenset[str]:
        """The lower-case names of the earlier steps its references read (from the few nodes,
        not from the params again)."""
        names: set[str] = set()
        todo = [self.root] if self.dynamic else []
        while todo:
            node = todo.pop()
            if isinstance(node, _Reference):
                names.add(node.name.lower())
            elif isinstance(node, _Mapping):
                todo.extend(v for _, v in node.filled)
            elif isinstance(node, _List):
                todo.extend(v for v in node.items if isinstance(v, _NODES))
        return frozenset(names)


def shape_rows(shape: ParamsPlan | None, rows: list[Any], variables: Mapping[str, Any]) -> list[Any]:
    """The rows a chunk sends: each one filled into the step's ``chunk_row`` (None: as they are)."""
    if shape is None:
        return rows
    scope = ChainMap[str, Any]({}, dict(variables))
    shaped = []
    for row in rows:
        scope.maps[0]["row"] = row
        shaped.append(shape.fill(scope, {}))
    return shaped


def plan_chunk_row(step: Step) -> ParamsPlan | None:
    """The step's ``chunk_row`` walked once, as its params are (no references: a row's shape takes
    its values from the row and the variables)."""
    return plan_params(step.chunk_row, (), step) if step.chunk_row is not None else None


def plan_params(params: dict[str, Any], known: Collection[str], step: Step | None = None) -> ParamsPlan:
    """Walk ``params`` once: ``known`` holds the lower-case names of the earlier steps, so an
    ``@name.field`` naming none of them stays a word of data.  With ``step``, a reference that
    misses at run time is told at its place in the pool file."""
    root = _compile(params, known, step)
    return ParamsPlan(root, isinstance(root, _NODES))
