"""A step's data file as the plan sees it: where it is (variables filled in), its fields, and, read
whole, its rows checked against the step's templates and key.

The checks here are the ones a run would otherwise meet only at a row: a file that is not there, a
``${row.field}`` the file does not have, a row that cannot be read or sent, two rows with one key.
``check`` reads the fields; ``check --data``, ``run --dry-run`` and ``run`` read every row.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol

from pooler.errors import PoolerError, Problem, did_you_mean
from pooler.pool.against import Declared
from pooler.pool.comparing import header_problems
from pooler.pool.keyset import Holder, KeySet
from pooler.pool.model import Pool, Step
from pooler.pool.rows import chunks, format_of, iter_rows, numbered_rows, open_file
from pooler.pool.rowtypes import RowTypes
from pooler.pool.variables import OPEN, key_filler, lookup, placeholders, substitute

#: Rows a problem names at most, so a file with a bad column does not print a million lines.
MAX_ROW_PROBLEMS = 5


class RowSink(Protocol):
    """Takes every row the check's pass reads, so a run writes its task's plan from that one pass
    (``run/taskplan.py``'s ``PlanStage``) instead of reading each data file again."""

    def begin(self, values: Mapping[str, Any], secrets: Iterable[str]) -> None:
        """The variables the rows' keys are filled from, and the secrets among them."""

    def row(self, step: Step, index: int, row: dict[str, Any], key: str | None) -> None:
        """Row ``index`` (from 0) of the step's file, with its key as the check filled it (None:
        not filled, as for the rows after the first of a chunk)."""

    def done(self, step: Step, rows: int) -> None:
        """Every row of the step's file was handed over and read without a problem."""


@dataclass
class DataFile:
    """A step's data file: its path, how it is read, its fields and (read whole) its row count."""

    path: Path
    format: str
    delimiter: str | None = None
    encoding: str | None = None
    #: The CSV header, or the first row's fields of a JSON(L) file; None when it has no rows.
    fields: tuple[str, ...] | None = None
    #: The number of rows, when the file was read whole (at most ``sample``).
    rows: int | None = None
    first: dict[str, Any] | None = None

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        return iter_rows(self.path, self.format, delimiter=self.delimiter, encoding=self.encoding)

    def numbered(self) -> Iterator[tuple[int | None, dict[str, Any]]]:
        """The rows with the line each starts on (None in a JSON file)."""
        return numbered_rows(self.path, self.format, delimiter=self.delimiter, encoding=self.encoding)


def data_path(pool: Pool, name: str) -> Path:
    """A data file's path: relative names start from the pool's folder."""
    path = Path(name).expanduser()
    return path if path.is_absolute() else pool.data_folder() / path


def locate(pool: Pool, step: Step, values: Mapping[str, Any] | None, *,
           fields: bool = True) -> tuple[DataFile | None, list[Problem]]:
    """The step's data file with its fields, or the problems that stop it from being read.

    ``values`` are the variables (None: not known, so a templated name is left for later).
    Without ``fields`` only its place is found (the file is not opened).
    """
    each = step.for_each
    if each is None or not isinstance(each.file, str):
        return None, []
    name = each.file
    if OPEN in name:
        if values is None:
            return None, []
        try:
            name = str(substitute(name, values))
        except PoolerError:
            return None, []  # the template checks tell what is wrong with the name
    path = data_path(pool, name)
    where = ("for_each", "file")
    if not path.is_file():
        return None, [step.problem(f"No such file: {path} - for_each.file of step {step.num} is read "
                                   "relative to the pool file's folder.", *where)]
    try:
        fmt = format_of(path, each.format)
    except PoolerError:
        return None, []  # the checks tell the format is unknown
    found = DataFile(path, fmt, each.delimiter if fmt == "csv" else None, each.encoding)
    if not fields:
        return found, []
    try:
        found.fields, found.first = _fields(found)
    except PoolerError as exc:
        return None, [step.problem(exc.message, *where)]
    return found, _field_problems(step, found)


def _fields(data: DataFile) -> tuple[tuple[str, ...] | None, dict[str, Any] | None]:
    if data.format == "csv":
        with open_file(data.path) as raw:
            # Only the header line's bytes: a file of any size costs one line here.
            head = raw.readline()
        text = head.decode(data.encoding or "utf-8-sig", errors="replace")
        record = next(csv.reader([text], delimiter=data.delimiter or ","), [])
    first = next(data.iter_rows(), None)
    if data.format == "csv":
        return tuple(record), first
    return (tuple(first) if first is not None else None), first


def row_names(step: Step) -> list[tuple[tuple[str | int, ...], str]]:
    """Every ``${row...}`` of the step that is filled from one row: where it is, and the name."""
    each = step.for_each
    found: list[tuple[tuple[str | int, ...], str]] = []
    if each is None:
        return found
    if each.chunk is None:
        found.extend((("params", *path), name) for path, name in placeholders(step.params)
                     if name.partition(".")[0] == "row")
    elif step.chunk_row is not None:
        found.extend((("chunk_row", *path), name) for path, name in placeholders(step.chunk_row)
                     if name.partition(".")[0] == "row")
    if isinstance(step.key, str):
        found.extend((("key",), name) for _, name in placeholders(step.key)
                     if name.partition(".")[0] == "row")
    if step.compare is not None:
        # A compare read once a row is filled from each row, whatever the chunk.
        found.extend((("compare", "params", *path), name) for path, name in placeholders(step.compare.params)
                     if name.partition(".")[0] == "row")
    if step.probe is not None:
        # A probe is filled from the call's row (its first one, for a chunk).
        found.extend((("probe", "params", *path), name) for path, name in placeholders(step.probe.params)
                     if name.partition(".")[0] == "row")
    return found


def _field_problems(step: Step, data: DataFile) -> list[Problem]:
    if data.fields is None:
        return []
    problems = []
    for where, name in row_names(step):
        field = name.split(".")[1] if "." in name else ""
        if not field or field in data.fields:
            continue
        hint = did_you_mean(field, list(data.fields))
        message = (f"${{{name}}} in {'.'.join(map(str, where))} of step {step.num}: {data.path} has no field "
                   f"[{field}]{hint or ''}{'' if hint else ' - its fields: ' + ', '.join(data.fields) + '.'}")
        message += _delimiter_hint(data)
        problems.append(step.problem(message, *where))
    problems.extend(header_problems(step, data.fields, str(data.path)))
    return problems


def _delimiter_hint(data: DataFile) -> str:
    if data.format != "csv" or data.fields is None or len(data.fields) != 1:
        return ""
    for mark, shown in ((";", "';'"), ("\t", "a tab ('\\t')"), ("|", "'|'")):
        if mark in data.fields[0]:
            return f" Its header is one field holding {shown}: give the separator with for_each.delimiter."
    return ""


def read_whole(step: Step, data: DataFile, values: Mapping[str, Any], keys: KeySet,
               sample: int | None, *, partial: bool = False, rows: bool = True,
               declared: Declared | None = None, sink: RowSink | None = None,
               ) -> list[Problem]:
    """Read every row (up to ``sample``): count them, fill each row's templates and key as a call
    would, and add the keys to ``keys``.  Every problem found, each row named.  ``partial``: not
    every variable is known, so a key that needs one is not checked.  Without ``rows`` the rows'
    templates are not filled (a field the file lacks was told already).  With ``declared`` (the
    store's name of the command and its field types), every value a row gives a declared field
    is cast as the store would cast it.  ``sink`` takes every row as it is read."""
    each = step.for_each
    assert each is not None
    problems: list[str] = []
    #: Each with the row it names: a repeat the key set tells after the last row goes in its place.
    key_problems: list[tuple[int, str]] = []
    # The fields each ${row.a.b} needs, split once: a row is checked by plain lookups.
    # A chunk's key and probe take its first row; its shape (chunk_row) takes every row.
    needed = [name.split(".")[1:] for where, name in row_names(step)
              if each.chunk is None or where[0] == "chunk_row"] if rows else []
    key = step.key if step.key is not None and not (partial and _needs_variable(step.key, values)) else None
    fill_key = key_filler(key) if key is not None else None
    scope = dict(values)
    typed = (RowTypes.of(step, data.path, declared, data.fields if data.format == "csv" else None)
             if rows else None)
    numbered: Iterator[tuple[int | None, dict[str, Any]]] = data.numbered()
    if typed is not None:
        numbered = _typed(numbered, typed, dict(values))
    # map and zip step through the rows in C: a million-row file pays no Python frame for them.
    source: Iterator[dict[str, Any]] = map(itemgetter(1), numbered)
    if sample is not None:
        source = islice(source, sample)
    count = 0
    groups: Iterable[Sequence[dict[str, Any]]] = chunks(source, each.chunk) if each.chunk else zip(source)
    try:
        for group in groups:
            first_row = count
            count += len(group)
            if needed and len(problems) < MAX_ROW_PROBLEMS:
                for offset, row in enumerate(group):
                    wrong = _row_problem(row, needed)
                    if wrong is not None:
                        problems.append(f"row {first_row + offset + 1} of {data.path}: {wrong}")
            rendered = None
            if fill_key is not None:
                scope["row"] = group[0]
                rendered, told = _key_problem(step, data, fill_key, scope, keys=keys, first_row=first_row)
                key_problems.extend((first_row, message) for message in told)
            if sink is not None:
                for offset, row in enumerate(group):
                    sink.row(step, first_row + offset, row, None if offset else rendered)
    except PoolerError as exc:
        problems.append(exc.message)
    else:
        if sink is not None:
            sink.done(step, count)
    if fill_key is not None:
        repeats = _repeats(step, data, fill_key, dict(values), sample=sample, keys=keys)
        key_problems = sorted([*key_problems, *repeats], key=itemgetter(0))
    data.rows = count
    return [*(step.problem(message, "for_each", "file") for message in problems[:MAX_ROW_PROBLEMS + 1]),
            *(step.problem(message, "key") for _, message in key_problems[:MAX_ROW_PROBLEMS]),
            *(typed.told() if typed is not None else ())]


def _typed(rows: Iterator[tuple[int | None, dict[str, Any]]], typed: RowTypes,
           scope: dict[str, Any]) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """The rows as they pass, each checked against the declared types on its way."""
    for number, (line, row) in enumerate(rows, 1):
        typed.check(row, scope, line, number)
        yield line, row


def _needs_variable(template: str, values: Mapping[str, Any]) -> bool:
    return any(name.partition(".")[0] not in ("row", *values) for _, name in placeholders(template))


def _row_problem(row: dict[str, Any], needed: list[list[str]]) -> str | None:
    """What a call would refuse in this row's templates: a field it lacks (in the words of
    ``values.lookup``, which the call fills them with)."""
    for parts in needed:
        found: Any = row
        for part in parts:
            if isinstance(found, dict) and part in found:
                found = found[part]
            elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                found = found[int(part)]
            else:
                try:
                    lookup(".".join(["row", *parts]), {"row": row})
                except PoolerError as exc:
                    return exc.message
                break
    return None


def _key_problem(step: Step, data: DataFile, fill: Callable[[Mapping[str, Any]], str],
                 scope: Mapping[str, Any], *, keys: KeySet, first_row: int) -> tuple[str | None, list[str]]:
    """The row's key (None when it cannot be filled) and what is wrong with it."""
    try:
        key = fill(scope)
    except PoolerError as exc:
        return None, [f"row {first_row + 1} of {data.path}: {exc.message}"]
    earlier = keys.add(key, step.num, first_row)
    if earlier is None:
        return key, []
    return key, [_repeat(step, data, key, first_row, earlier)]


def _repeats(step: Step, data: DataFile, fill: Callable[[Mapping[str, Any]], str], scope: dict[str, Any],
             *, sample: int | None, keys: KeySet) -> list[tuple[int, str]]:
    """The rows of ``step`` whose key the key set found given before only once they were all
    read (past its memory keys), told as ``_key_problem`` tells one.  It keeps digests, not keys:
    the file is read again up to the last of them (only when there is one) for their keys' text."""
    found = keys.repeats(step.num, MAX_ROW_PROBLEMS)
    if not found:
        return []
    each = step.for_each
    assert each is not None
    wanted = {holder.row for holder, _ in found}
    last = max(row for row in wanted if row is not None)
    texts: dict[int, str] = {}
    source: Iterator[dict[str, Any]] = map(itemgetter(1), data.numbered())
    if sample is not None:
        source = islice(source, sample)
    first_row = 0
    for group in chunks(source, each.chunk) if each.chunk else zip(source):
        if first_row in wanted:
            scope["row"] = group[0]
            texts[first_row] = fill(scope)
        first_row += len(group)
        if first_row > last:
            break
    return [(holder.row, _repeat(step, data, texts[holder.row], holder.row, earlier))
            for holder, earlier in found if holder.row is not None and holder.row in texts]


def _repeat(step: Step, data: DataFile, key: str, first_row: int, earlier: Holder) -> str:
    """What is wrong with the call from row ``first_row``: its key was given first by ``earlier``."""
    chunked = step.for_each is not None and step.for_each.chunk is not None
    what, both = ("the chunk from row", "the chunks from rows") if chunked else ("row", "rows")
    fix = ("keys must be unique: the second call would be skipped as done. Put the field that tells the "
           "rows apart in the key.")
    if earlier.row is None:
        return (f"{what} {first_row + 1} of {data.path} gives the key [{key}], which step "
                f"{earlier.step} carries too - keys must be unique in a pool: a keyed call runs at "
                "most once per task.")
    if earlier.step == step.num:
        return f"{both} {earlier.row + 1} and {first_row + 1} of {data.path} give one key [{key}] - {fix}"
    return (f"{what} {first_row + 1} of {data.path} gives the key [{key}], which {what} "
            f"{earlier.row + 1} of step {earlier.step} gives too - {fix}")
