"""Strict JSON in and out: what pooler reads from a store and writes anywhere is JSON any parser takes.

A number JSON can write but a double cannot hold (``1e999``), and the ``NaN``/``Infinity`` some
encoders write although JSON has no such thing, are kept as **strings holding the store's text**
(``1e999`` becomes ``"1e999"``): nothing is lost, and no output or file ever holds ``Infinity`` or
``NaN``, which strict parsers refuse.  ``dumps`` writes any other non-finite float that reaches it
the same way (``"Infinity"``, ``"-Infinity"``, ``"NaN"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any


def _number(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


def _constant(text: str) -> str:
    return text


#: The decoder every answer of a store goes through (its C scanner is used row by row too).
DECODER = json.JSONDecoder(parse_float=_number, parse_constant=_constant)


def loads(body: bytes | bytearray | str) -> Any:
    """``json.loads`` with numbers JSON cannot carry kept as their text."""
    if not isinstance(body, str):
        body = body.decode(json.detect_encoding(body), "surrogatepass")
    return DECODER.decode(body)


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels (walked without recursion)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            todo.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            todo.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
    return False


def finite(value: Any) -> Any:
    """``value`` with every non-finite float as a string; copied only where one was found."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        out = {k: finite(v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, list | tuple):
        items = [finite(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` that never writes ``NaN`` or ``Infinity`` (the fast path costs nothing)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False, **options)


def encoder(**options: Any) -> Callable[[Any], str]:
    """One JSONEncoder's ``encode``, strict like ``dumps``."""
    enc = json.JSONEncoder(allow_nan=False, **options)

    def encode(value: Any) -> str:
        try:
            return enc.encode(value)
        except ValueError:
            return enc.encode(finite(value))
    return encode
