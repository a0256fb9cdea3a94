"""A step's ``compare``: the rule written once, for the check, the dry run, the run and the plan.

A row is found in the store's table by its ``match`` fields and is unchanged when its ``fields``
equal the table row's columns.  Values are compared as the store reads what it is sent: the row's
value as the call would send it (``for_each.decimal`` first: ``5306,19`` is 5306.19), then a number,
or a text that is wholly a JSON number, compares as that number (``"10.50"`` equals ``10.5`` and
``"10.5"``, since a float field of the store casts them alike), a true or false as 1 or 0, and
anything else as its text (``"007"`` is text, not seven; ``null`` equals only ``null`` or a
missing column).  Each side is reduced to one canonical text, so the journal matches rows by
plain equality; both are digests, so the journal never holds a row's values (a secret among them
included).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pooler.errors import Problem, did_you_mean
from pooler.pool.marks import KEY
from pooler.pool.model import Step
from pooler.pool.numbers import read_number
from pooler.pool.variables import placeholders

#: A text that is wholly a JSON number: "007" and "1 234" are not.
_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
#: A longer text is not read as a number (it is a code, and int() refuses thousands of digits).
_LONGEST = 100
_FRACTION = re.compile(r"[.eE]")
_STARTS = frozenset("-0123456789")


#: Whole numbers up to this size are exact as a float too: within it, 10.0 and 10 are one number.
_EXACT = 2**53


def _number(value: int | float | str) -> str:
    """One text for every spelling of a number's value: 10.5, "10.50" and 1.05e1 alike.  A whole
    number written without a fraction stays exact however long it is (a code of 20 digits is not
    rounded into another); one with a fraction or an exponent is the double a float field holds."""
    if isinstance(value, int) or (isinstance(value, str) and not _FRACTION.search(value)):
        whole = int(value)
        return "n" + str(whole) if abs(whole) >= _EXACT else "n" + repr(float(whole))
    number = float(value)
    if not math.isfinite(number):
        return "s" + str(value)
    return "n" + repr(number + 0.0 if number else 0.0)


def canon(value: Any) -> str:
    """A value as the compare sees it: equal texts, values the store holds alike."""
    if isinstance(value, str):
        # Most texts are no number: a number starts with a digit or a minus sign.
        if value and len(value) <= _LONGEST and (value[0] in _STARTS) and _JSON_NUMBER.fullmatch(value):
            return _number(value)
        return "s" + value
    if value is None:
        return "z"
    if isinstance(value, bool):
        return "n1.0" if value else "n0.0"
    if isinstance(value, (int, float)):
        return _number(value)
    return "j" + json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def as_sent(value: Any, decimal: str | None) -> Any:
    """A row's value as its call sends it: with ``decimal``, a text wholly a number is that number."""
    if decimal is not None and isinstance(value, str):
        number = read_number(value, decimal)
        return value if number is None else number
    return value


def row_texts(step: Step, row: Mapping[str, Any]) -> tuple[str, str]:
    """The digests of a data row's match values and of its compared fields."""
    assert step.compare is not None
    decimal = step.for_each.decimal if step.for_each is not None else None
    match = [canon(as_sent(row.get(name), decimal)) for name in step.compare.match]
    fields = [canon(as_sent(row.get(name), decimal)) for name in step.compare.fields]
    return _digest(match), _digest(fields)


def table_texts(step: Step, row: Mapping[str, Any]) -> tuple[str, str]:
    """The digests of a table row's match columns and of its compared columns, in the data row's
    order."""
    assert step.compare is not None
    match = [canon(row.get(column)) for column in step.compare.match.values()]
    fields = [canon(row.get(column)) for column in step.compare.fields.values()]
    return _digest(match), _digest(fields)


def _digest(parts: Sequence[str]) -> str:
    # Each part after its length: no two lists of parts are one text.
    text = parts[0] if len(parts) == 1 else "".join(f"{len(p)}:{p}" for p in parts)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def per_row(step: Step) -> bool:
    """Whether the compare reads once a row (its params hold ``${row...}``) rather than once."""
    assert step.compare is not None
    return any(name.partition(".")[0] == "row" for _, name in placeholders(step.compare.params))


def header_problems(step: Step, header: Sequence[str], file: str) -> Iterator[Problem]:
    """Each row field the compare's ``match`` and ``fields`` name, against the data file's fields."""
    if step.compare is None:
        return
    for part in ("match", "fields"):
        for name in getattr(step.compare, part):
            if name in header:
                continue
            hint = did_you_mean(name, list(header))
            yield step.problem(f"compare.{part} of step {step.num}: {file} has no field [{name}]"
                               f"{hint or ''}{'' if hint else ' - its fields: ' + ', '.join(header) + '.'}",
                               "compare", part, name, KEY)


def compare_problems(step: Step) -> Iterator[Problem]:
    """What is wrong with a step's compare by the pool alone."""
    compare = step.compare
    if compare is None:
        return
    n = step.num
    if step.for_each is None or not step.for_each.file:
        yield step.problem(f"compare of step {n} tells which rows of a data file are new or changed - give "
                           "the step for_each with a file.", "compare", KEY)
    finds = "the row's field and the table's column that find its table row, like {sku: sku}"
    for part, what in (("match", finds),
                       ("fields", "what must be equal for a row to be unchanged, like {price: price}")):
        if not getattr(compare, part):
            yield step.problem(f"compare.{part} of step {n} is empty - give {what}.", "compare", part)
    both = sorted(set(compare.match) & set(compare.fields))
    if both:
        yield step.problem(f"compare of step {n}: [{both[0]}] is in match and in fields - a field that finds "
                           "the table row cannot differ from it; leave it in match alone.",
                           "compare", "fields", both[0], KEY)


def compare_field_problems(step: Step, rows: Sequence[Mapping[str, Any]] | None, name: str
                           ) -> Iterator[Problem]:
    """With ``check --against``: each ``compare.fields`` row field is one the step sends, when its
    chunk field declares its rows (``rows``) and no ``chunk_row`` reshapes them."""
    if step.compare is None or rows is None or step.chunk_row is not None:
        return
    declared = [str(r.get("name")) for r in rows if isinstance(r, dict)]
    for field in (*step.compare.fields, *step.compare.match):
        if field not in declared:
            hint = did_you_mean(field, declared)
            part = "fields" if field in step.compare.fields else "match"
            yield step.problem(f"compare.{part} of step {step.num}: [{field}] is not a field of the rows "
                               f"{name} takes{hint or '.'} Its rows: {', '.join(declared)}.",
                               "compare", part, field, KEY)
