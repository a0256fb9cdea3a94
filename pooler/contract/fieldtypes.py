"""Casting the fields of a call to the types of their declaration, the way a PHP store does.

``"12"`` for ``int`` is 12; ``true``/``1``/``"1"``/``"true"`` for ``bool`` are true and
``false``/``0``/``"0"``/``"false"``/``""`` false; a JSON string for ``json`` is parsed; ``int/json``
and the like take one value or a list of them (also a JSON string of a list).
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from typing import Any

BASE_TYPES = ("str", "int", "float", "bool", "datetime")
TYPES = frozenset({*BASE_TYPES, "json", "jsonl", "files", *(f"{t}/json" for t in BASE_TYPES if t != "bool")})

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_TRUE = frozenset({"1", "true"})
_FALSE = frozenset({"0", "false", ""})


class CastError(ValueError):
    """A value that cannot be the field's type; the text says why."""


def shown(value: Any) -> str:
    """A value as JSON text, cut short for a message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CastError(f"{shown(value)} is not a whole number")
    if isinstance(value, str) and not _INT.fullmatch(value.strip()):
        raise CastError(f"{shown(value)} is not a whole number")
    if isinstance(value, float) and not value.is_integer():
        raise CastError(f"{shown(value)} is not a whole number")
    # The text as checked: str.strip drops more than int() skips (a "\x1f" after the digits).
    number = int(value.strip() if isinstance(value, str) else value)
    if not _INT_MIN <= number <= _INT_MAX:
        raise CastError(f"{number} is out of range for a whole number")
    return number


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CastError(f"{shown(value)} is not a number")
    if isinstance(value, str) and not _FLOAT.fullmatch(value.strip()):
        raise CastError(f"{shown(value)} is not a number")
    number = float(value.strip() if isinstance(value, str) else value)
    if not math.isfinite(number):
        raise CastError(f"{shown(value)} is too large a number")
    return number


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise CastError(f'{shown(value)} is not yes or no - send true, false, 1, 0, "1", "0" or ""')


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        # as PHP writes a float: 2.0 is "2"
        return str(int(value)) if value.is_integer() else repr(value)
    raise CastError(f"{shown(value)} is not text")


def _moment(value: Any) -> str:
    if isinstance(value, str):
        text = value.strip()
        try:
            moment = datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            try:
                moment = datetime.fromisoformat(text)
            except ValueError:
                moment = None
        if moment is not None:
            # the store keeps the wall-clock time it was given, as a DATETIME column does
            return moment.strftime("%Y-%m-%d %H:%M:%S")
    raise CastError(f'{shown(value)} is not a date and time - send "YYYY-MM-DD HH:MM:SS"')


_BASE = {"int": _whole, "float": _number, "bool": _flag, "str": _text, "datetime": _moment}


def _parsed(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise CastError(f"{shown(text)} is not JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _one_or_list(base: str, value: Any) -> Any:
    if isinstance(value, str) and value.lstrip().startswith("["):
        value = _parsed(value)
    if not isinstance(value, list):
        return _BASE[base](value)
    out = []
    for i, item in enumerate(value, 1):
        try:
            out.append(_BASE[base](item))
        except CastError as exc:
            raise CastError(f"element {i} of the list: {exc}") from None
    return out


def _rows(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        value = _parsed(value)
    if not isinstance(value, list):
        raise CastError(f"{shown(value)} is not a list of rows")
    for i, row in enumerate(value, 1):
        if not isinstance(row, dict):
            raise CastError(f"row {i} is {shown(row)}, not an object")
    return value


def cast(type_: str, value: Any) -> Any:
    """``value`` as the type ``type_``; raises ``CastError`` with the reason."""
    if type_ in _BASE:
        return _BASE[type_](value)
    if type_ == "json":
        return _parsed(value) if isinstance(value, str) else value
    if type_ == "jsonl":
        return _rows(value)
    if type_.endswith("/json") and type_[:-5] in _BASE:
        return _one_or_list(type_[:-5], value)
    raise CastError(f"the type {type_} is not one the store knows")
