"""A step's compare carried out: the store's rows read once, and every row of the step's data file
classified new, changed or unchanged before anything is sent.

The table is read as the client reads any answer (its rows decoded one at a time from the body),
and both sides go to the journal's ``compare_rows`` as a match text and a digest
(``pooler/pool/comparing.py``): the journal matches them, and what comes back is the file's rows
that are sent, kept as one bit a row.  A plan (``pooler plan``) and its apply call ``classify``
alike, and ``classify`` with some rows alone re-reads the store for them (a conflict check).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.errors import StoreError
from pooler.journal.comparerows import FILE, STORE, CompareRows
from pooler.pool.comparing import per_row, row_texts, table_texts
from pooler.pool.datafiles import locate
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
        byte = index >> 3
        return byte < len(self.bits) and bool(self.bits[byte] & (1 << (index & 7)))

    def class_of(self, index: int) -> CompareClass:
        """Row ``index``'s class."""
        if not self.sends(index):
            return UNCHANGED
        byte = index >> 3
        changed = byte < len(self.changed_bits) and self.changed_bits[byte] & (1 << (index & 7))
        return CHANGED if changed else NEW

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


def read_table(client: ToolRunClient, step: Step, values: Mapping[str, Any]) -> Iterable[Any]:
    """The store's rows the step's compare reads: its table, decoded a row at a time; a read that
    fails raises ``StoreError``, before anything of the step is sent."""
    compare = step.compare
    assert compare is not None
    unit = step.compare_unit
    what = f"the compare of step {step.num} ({unit}.{compare.command})"
    params = plan_params(compare.params, (), step).fill(dict(values), {})
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
    if table is None:
        names = ", ".join(sorted(tables)) if isinstance(tables, dict) and tables else "none"
        raise StoreError(f"{what} answered no table [{compare.table}] (its tables: {names}) - nothing of the "
                         "step was sent; name the table the read answers in compare.table.",
                         store=client.shown_url, sent=False)
    return _rows_of(table, what, client.shown_url)


def _rows_of(table: Iterable[Any], what: str, store: str) -> Iterator[Any]:
    for number, row in enumerate(table, 1):
        if not isinstance(row, dict):
            raise StoreError(f"{what}: row {number} of its table is not an object - nothing of the step was "
                             "sent.", store=store, sent=False)
        yield row


def classify(rows: CompareRows, client: ToolRunClient, step: Step, values: Mapping[str, Any],
             data: Iterable[tuple[int, Mapping[str, Any]]], *, scope: str | None = None) -> Classified:
    """Step ``step``'s rows ``data`` (each with its number in the file) classified against the
    store's rows as its compare reads them now; matched in the journal under a scope of their own
    (``scope``: a name for it), which is dropped whatever happens."""
    assert step.compare is not None
    if per_row(step):
        raise StoreError(f"the compare of step {step.num} reads once a row (${{row...}} in compare.params), "
                         "which this version does not send - read the table once with a list command.",
                         store=client.shown_url, sent=False)
    scope = f"{scope or 'compare'}:{secrets.token_hex(6)}"
    found = Classified(step.num)
    try:
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
        found[step.num] = classify(rows, client, step, values, enumerate(data.iter_rows()), scope=scope)
    return found
