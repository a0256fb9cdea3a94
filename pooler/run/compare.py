"""A step's compare carried out: the store's rows read once, and every row of the step's data file
classified new, changed or unchanged before anything is sent.

The table is read as the client reads any answer (its rows decoded one at a time from the body),
and both sides go to the journal's ``compare_rows`` as a match text and a digest
(``pooler/pool/comparing.py``): the journal matches them, and what comes back is the file's rows
that are sent, kept as one bit a row.  A plan (``pooler plan``) and its apply call ``classify``
alike; what the store holds of some rows, to tell one that moved since a plan, is read by
``pooler.run.conflicts`` through the same reads.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.errors import StoreError
from pooler.journal.comparerows import FILE, STORE, CompareRows
from pooler.pool.comparing import per_row, row_texts, table_texts
from pooler.pool.compiler import Plan
from pooler.pool.datafiles import DataFile, locate
from pooler.pool.model import Pool, Step
from pooler.pool.paramplan import plan_params
from pooler.statuses import CompareClass

NEW, CHANGED, UNCHANGED = CompareClass.NEW, CompareClass.CHANGED, CompareClass.UNCHANGED


@dataclass
class Classified:
    """A step's rows by class: counts, and which rows (by number in the file) are sent."""

    num: int
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    #: One bit a row of the file: set for a row that is sent.
    bits: bytearray = field(default_factory=bytearray, repr=False)
    #: Set for a changed row (a sent row without it is new).
    changed_bits: bytearray = field(default_factory=bytearray, repr=False)

    def sends(self, index: int) -> bool:
        """Whether row ``index`` of the file is sent (new or changed)."""
        return self.class_of(index) is not UNCHANGED

    def class_of(self, index: int) -> CompareClass:
        """Row ``index``'s class (what a plan of the task tells of each call's rows)."""
        byte, bit = index >> 3, 1 << (index & 7)
        if byte >= len(self.bits) or not self.bits[byte] & bit:
            return UNCHANGED
        return CHANGED if byte < len(self.changed_bits) and self.changed_bits[byte] & bit else NEW

    def sent_rows(self) -> Iterator[int]:
        """The numbers of the rows that are sent (new or changed), in order."""
        for byte, held in enumerate(self.bits):
            left = held
            while left:
                low = left & -left
                yield byte * 8 + low.bit_length() - 1
                left ^= low

    def calls(self, chunk: int | None, sample: int | None = None) -> int:
        """The calls that send the rows (of the first ``sample`` rows of the file): one a row, or one
        a ``chunk`` of them."""
        if sample is None:
            sent = self.new + self.changed
        else:
            whole, rest = divmod(sample, 8)
            sent = sum(bin(b).count("1") for b in self.bits[:whole])
            if rest and whole < len(self.bits):
                sent += bin(self.bits[whole] & ((1 << rest) - 1)).count("1")
        return -(-sent // chunk) if chunk else sent

    def call_class(self, rows: list[int]) -> CompareClass:
        """The class of a call that sends ``rows`` (its row, or its chunk's first and last): a
        chunk holding a changed row is changed, one of new rows alone is new."""
        if len(rows) == 1:
            return self.class_of(rows[0])
        found = {self.class_of(i) for i in range(rows[0], rows[-1] + 1)}
        return CHANGED if CHANGED in found else NEW if NEW in found else UNCHANGED

    def doc(self) -> dict[str, int]:
        """The counts as the answer, the task and the dry run keep them."""
        return {str(NEW): self.new, str(CHANGED): self.changed, str(UNCHANGED): self.unchanged}

    def _mark(self, index: int, kind: str) -> None:
        byte, bit = index >> 3, 1 << (index & 7)
        for bits, on in ((self.bits, True), (self.changed_bits, kind == CHANGED)):
            if on:
                if byte >= len(bits):
                    bits.extend(bytes(byte + 1 - len(bits)))
                bits[byte] |= bit


def read_table(client: ToolRunClient, step: Step, values: Mapping[str, Any],
               row: Mapping[str, Any] | None = None) -> Iterable[Any]:
    """The store's rows the step's compare reads: its table, decoded a row at a time; a read that
    fails raises ``StoreError``, before anything of the step is sent.  ``row``: the data row a read
    once a row is filled from; its ``table`` may also name a field of the answer's detail that
    holds the row (or null, or a list of rows), as a read of one row often answers it."""
    compare = step.compare
    assert compare is not None
    unit = step.compare_unit
    what = f"the compare of step {step.num} ({unit}.{compare.command})"
    scope: dict[str, Any] = dict(values) if row is None else {**values, "row": row}
    params = plan_params(compare.params, (), step).fill(scope, {})
    try:
        reply = client.tool_run(unit, compare.command, params)
    except StoreError as exc:
        raise StoreError(f"{what} could not read the store: {exc.message} - nothing of the step was sent.",
                         store=exc.store, sent=False, kind=exc.kind) from None
    if not reply.result:
        raise StoreError(f"{what} was refused: {reply.message or 'no message'} - nothing of the step was "
                         "sent.", store=client.shown_url, sent=False)
    tables = reply.data.get("tables")
    table = tables.get(compare.table) if isinstance(tables, dict) else None
    detail = reply.data.get("detail")
    if table is None and row is not None and isinstance(detail, dict) and compare.table in detail:
        found = detail[compare.table]
        table = [] if found is None else found if isinstance(found, list) else [found]
    if table is None:
        names = ", ".join(sorted(tables)) if isinstance(tables, dict) and tables else "none"
        raise StoreError(f"{what} answered no table [{compare.table}] (its tables: {names}) - nothing of the "
                         "step was sent; name the table the read answers in compare.table.",
                         store=client.shown_url, sent=False)
    return _rows_of(table, what, client.shown_url, (*compare.match.values(), *compare.fields.values()))


def read_per_row(client: ToolRunClient, step: Step, values: Mapping[str, Any],
                 data: Iterable[tuple[int, Mapping[str, Any]]], per_second: float | None
                 ) -> Iterator[tuple[int, Any]]:
    """The store's rows read once a row of the file, each read held to the step's rate as its
    calls are (a read is a call the store carries out like any other)."""
    interval = 1.0 / per_second if per_second else 0.0
    next_at = time.monotonic()
    for index, row in data:
        if interval:
            wait = next_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            # Each read starts an interval after the one before it started, at the soonest.
            next_at = time.monotonic() + interval
        for found in read_table(client, step, values, row):
            yield index, found


def _rows_of(table: Iterable[Any], what: str, store: str, columns: Iterable[str]) -> Iterator[Any]:
    """The table's rows, each an object; the first one holds every column the compare reads, or
    the read stops the step (a column misspelt would make every row new, and send them all)."""
    wanted = list(dict.fromkeys(columns))
    for number, row in enumerate(table, 1):
        if not isinstance(row, dict):
            raise StoreError(f"{what}: row {number} of its table is not an object - nothing of the step was "
                             "sent.", store=store, sent=False)
        if number == 1:
            missing = [c for c in wanted if c not in row]
            if missing:
                has = ", ".join(map(str, row)) or "none"
                raise StoreError(f"{what}: its table has no column [{missing[0]}] (its columns: {has}) - "
                                 "nothing of the step was sent; name the table's columns in compare.match "
                                 "and compare.fields.", store=store, sent=False)
        yield row


def classify(rows: CompareRows, client: ToolRunClient, step: Step, values: Mapping[str, Any],
             data: Iterable[tuple[int, Mapping[str, Any]]], *, scope: str | None = None,
             per_second: float | None = None) -> Classified:
    """Step ``step``'s rows ``data`` (each with its number in the file) classified against the
    store's rows as its compare reads them now; matched in the journal under a scope of their own
    (``scope``: a name for it), which is dropped whatever happens.  A compare that reads once a row
    reads ``data`` twice (give a list, or an iterable that starts again), its reads held to
    ``per_second`` (the step's rate)."""
    assert step.compare is not None
    scope = f"{scope or 'compare'}:{secrets.token_hex(6)}"
    found = Classified(step.num)
    try:
        if per_row(step):
            read = read_per_row(client, step, values, data, per_second)
            rows.put(scope, step.num, STORE, ((i, *table_texts(step, r)) for i, r in read))
        else:
            table = read_table(client, step, values)
            rows.put(scope, step.num, STORE, ((i, *table_texts(step, r)) for i, r in enumerate(table)))
        total = rows.put(scope, step.num, FILE, ((i, *row_texts(step, r)) for i, r in data))
        for index, kind in rows.sent(scope, step.num):
            found._mark(index, kind)
            if kind == CHANGED:
                found.changed += 1
            else:
                found.new += 1
        found.unchanged = total - found.new - found.changed
        return found
    finally:
        rows.clear(scope)


def compare_steps(rows: CompareRows, client: ToolRunClient, pool: Pool, values: Mapping[str, Any], *,
                  scope: str) -> dict[int, Classified]:
    """Every step with a compare, its data file's rows classified, by step number.  A step whose
    file cannot be found is left to the check, which tells it before anything is sent."""
    found: dict[int, Classified] = {}
    for step in pool.steps:
        if step.compare is None or step.for_each is None or not step.for_each.file:
            continue
        data, problems = locate(pool, step, values, fields=False)
        if data is None or problems or not data.path.is_file():
            continue
        pace = pool.paces().get(step.num)
        found[step.num] = classify(rows, client, step, values, FileRows(data), scope=scope,
                                   per_second=pace.rate.per_second if pace is not None else None)
    return found


class FileRows:
    """A data file's rows with their numbers, read again from its start each time they are iterated."""

    def __init__(self, data: DataFile) -> None:
        self.data = data

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any]]]:
        return enumerate(self.data.iter_rows())


def with_compares(plan: dict[str, Any], compiled: Plan, compared: Mapping[int, Classified]) -> None:
    """The plan document (``build_plan``) with each compare's counts, and the calls that send only
    its new and changed rows: what ``run --dry-run`` and MCP's ``pool_run {"dry_run": true}`` tell."""
    for entry in plan["steps"]:
        found = compared.get(int(entry["num"]))
        if found is None:
            continue
        step = compiled.pool.steps[int(entry["num"]) - 1]
        entry["compare"] = found.doc()
        chunk = step.for_each.chunk if step.for_each is not None else None
        entry["calls"] = found.calls(chunk, compiled.sample)
    if compared and all(e["calls"] is not None for e in plan["steps"]):
        plan["calls"] = sum(int(e["calls"]) for e in plan["steps"])
