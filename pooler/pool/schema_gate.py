"""A quick yes/no of the pool schema, compiled from the same schema file into plain closures.

jsonschema tells precisely what is wrong but costs about a hundred microseconds per step; a file
of 10,000 steps would spend seconds there.  This compiles the few keywords the pool schema uses into
Python checks once; a document it calls valid is valid, and anything else goes to jsonschema for the
words.  A keyword it does not know makes it decline (``compile_schema`` returns None), never guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "examples", "default", "$defs",
                          "$comment"})
_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}


class _UnsupportedError(Exception):
    pass


def compile_schema(schema: dict[str, Any]) -> Check | None:
    """A check of the whole schema, or None when it uses a keyword this module does not know."""
    try:
        return _Compiler(schema).compile(schema)
    except _UnsupportedError:
        return None


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, target: str) -> Check:
        if not target.startswith("#/$defs/"):
            raise _UnsupportedError(target)
        known = self.refs.get(target)
        if known is not None:
            return known
        holder: list[Check] = []

        def late(v: Any) -> bool:
            return holder[0](v)

        # Registered before compiling, so a schema that refers to itself compiles.
        self.refs[target] = late
        holder.append(self.compile(self.root["$defs"][target.rsplit("/", 1)[1]]))
        self.refs[target] = holder[0]
        return holder[0]

    def compile(self, schema: Any) -> Check:
        if schema is True or schema == {}:
            return lambda v: True
        if schema is False:
            return lambda v: False
        if not isinstance(schema, dict):
            raise _UnsupportedError(schema)
        checks: list[Check] = []
        for key, arg in schema.items():
            if key in _ANNOTATIONS:
                continue
            if key in ("if", "then", "else", "additionalProperties", "properties"):
                continue  # compiled together below
            checks.append(self.keyword(key, arg))
        if "properties" in schema or "additionalProperties" in schema:
            checks.append(self.object(schema.get("properties", {}), schema.get("additionalProperties", True)))
        if "if" in schema:
            checks.append(self.condition(schema))
        return _every(checks)

    def keyword(self, key: str, arg: Any) -> Check:
        if key == "type":
            names = [arg] if isinstance(arg, str) else list(arg)
            tests = [_TYPES[n] for n in names]
            if len(tests) == 1:
                return tests[0]
            return lambda v: any(t(v) for t in tests)
        if key == "enum":
            if all(isinstance(c, str) for c in arg):
                # The common enum, of words: one set lookup (a str subclass never comes from a parser).
                words = frozenset(arg)
                return lambda v: type(v) is str and v in words
            return lambda v: any(type(v) is type(c) and v == c for c in arg)
        if key == "minimum":
            return lambda v: not _TYPES["number"](v) or v >= arg
        if key == "maximum":
            return lambda v: not _TYPES["number"](v) or v <= arg
        if key == "minLength":
            return lambda v: not isinstance(v, str) or len(v) >= arg
        if key == "maxLength":
            return lambda v: not isinstance(v, str) or len(v) <= arg
        if key == "minItems":
            return lambda v: not isinstance(v, list) or len(v) >= arg
        if key == "pattern":
            found = re.compile(arg).search
            return lambda v: not isinstance(v, str) or found(v) is not None
        if key == "required":
            needed = frozenset(arg)
            return lambda v: not isinstance(v, dict) or needed <= v.keys()
        if key == "items":
            item = self.compile(arg)
            return lambda v: not isinstance(v, list) or all(map(item, v))
        if key == "$ref":
            return self.ref(arg)
        if key == "oneOf":
            branches = [self.compile(b) for b in arg]
            return lambda v: sum(1 for b in branches if b(v)) == 1
        if key in ("anyOf", "allOf"):
            branches = [self.compile(b) for b in arg]
            if key == "anyOf":
                return lambda v: any(b(v) for b in branches)
            return lambda v: all(b(v) for b in branches)
        if key == "not":
            inner = self.compile(arg)
            return lambda v: not inner(v)
        if key == "dependentRequired":
            needs = {name: tuple(others) for name, others in arg.items()}
            return lambda v: not isinstance(v, dict) or all(
                all(o in v for o in others) for name, others in needs.items() if name in v)
        if key == "propertyNames":
            name = self.compile(arg)
            return lambda v: not isinstance(v, dict) or all(map(name, v))
        raise _UnsupportedError(key)

    def object(self, properties: dict[str, Any], additional: Any) -> Check:
        known = {name: self.compile(sub) for name, sub in properties.items()}
        other = self.compile(additional)

        def check(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            for name, value in v.items():
                test = known.get(name, other)
                if not test(value):
                    return False
            return True

        return check

    def condition(self, schema: dict[str, Any]) -> Check:
        test = self.compile(schema["if"])
        then = self.compile(schema.get("then", True))
        otherwise = self.compile(schema.get("else", True))
        return lambda v: then(v) if test(v) else otherwise(v)


def _every(checks: list[Check]) -> Check:
    """All of ``checks``, in order, stopping at the first that fails (a schema of several
    keywords): a chain of plain calls, cheaper per value than a generator over the list."""
    if not checks:
        return lambda v: True
    first, *rest = checks
    if not rest:
        return first
    others = _every(rest)
    return lambda v: first(v) and others(v)
