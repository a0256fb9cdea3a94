"""The conflicts of ``pooler apply``: the planned rows that moved in the store since the plan.

A plan keeps, for each row a call of a step with ``compare:`` sends, what the store held of it
when planned: nothing (a new row), or its compared columns (a changed row).  Before the calls are
sent, the store is read again by the same compare; a planned row whose class is not the planned
one, or whose compared columns are not those the plan saw, moved since the plan (another writer
changed it, or added it): its call is a conflict, not sent and listed, and the apply exits 1;
``--refresh`` sends the calls as the store is now.  Only the rows a call sends are looked at: a row
unchanged when planned is no call of the plan.  A step without ``compare:`` has no conflicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pooler.client.http import ToolRunClient
from pooler.errors import InputError
from pooler.journal.documents import Conflict
from pooler.pool.comparing import canon, per_row, row_texts, table_texts
from pooler.pool.datafiles import locate
from pooler.pool.model import Pool, Step
from pooler.run.compare import Classified, FileRows, read_per_row, read_table
from pooler.statuses import CompareClass

#: A row's compared columns as the store holds them (by column); None: the store has no such row.
Columns = dict[str, Any] | None


@dataclass
class Found:
    """What a read of the store found of some rows of a step's file."""

    #: Their compared columns now, by row number (a row the store lacks is absent).
    columns: dict[int, dict[str, Any]]
    #: The values that find each row (``sku G17``), for the listing.
    named: dict[int, str]


def store_columns(client: ToolRunClient, pool: Pool, step: Step, values: Mapping[str, Any],
                  wanted: Iterable[int]) -> Found:
    """The store's compared columns of the rows ``wanted`` of the step's file, as its compare
    reads them now: its table once, or one read a row for a compare that reads once a row (held to
    the step's rate).  Only the rows wanted are held."""
    compare = step.compare
    assert compare is not None
    wanted = set(wanted)
    found = Found({}, {})
    if not wanted:
        return found
    data, _ = locate(pool, step, values, fields=False)
    assert data is not None
    rows: dict[int, Mapping[str, Any]] = {}
    by_match: dict[str, list[int]] = {}
    for index, row in FileRows(data):
        if index in wanted:
            rows[index] = row
            by_match.setdefault(row_texts(step, row)[0], []).append(index)
            found.named[index] = " ".join(f"{field} {row.get(field)}" for field in compare.match)
    if per_row(step):
        pace = pool.paces().get(step.num)
        table: Iterator[tuple[int | None, Any]] = read_per_row(
            client, step, values, sorted(rows.items()), pace.rate.per_second if pace is not None else None)
    else:
        table = ((None, r) for r in read_table(client, step, values))
    for _, got in table:
        for index in by_match.get(table_texts(step, got)[0], ()):
            found.columns[index] = {column: got.get(column) for column in compare.fields.values()}
    return found


def planned_columns(client: ToolRunClient, pool: Pool, values: Mapping[str, Any],
                    compared: Mapping[int, Classified]) -> dict[int, dict[int, Columns]]:
    """What the store holds now of the changed rows of each step's compare, as a plan keeps it
    (a new row is known by its class: the store had none)."""
    steps = {s.num: s for s in pool.steps}
    out: dict[int, dict[int, Columns]] = {}
    for num, found in compared.items():
        changed = [i for i in found.sent_rows() if found.class_of(i) is CompareClass.CHANGED]
        out[num] = dict(store_columns(client, pool, steps[num], values, changed).columns)
    return out


def from_plan(calls: Iterable[Mapping[str, Any]], steps: Iterable[Mapping[str, Any]]
              ) -> tuple[dict[int, Classified], dict[int, dict[int, Columns]]]:
    """The classes a plan gave the rows of its steps with ``compare:``, and what the store held of
    its changed rows: the task an apply runs is planned from these, so it makes the plan's calls."""
    planned: dict[int, Classified] = {}
    was: dict[int, dict[int, Columns]] = {}
    for call in calls:
        if "compare" in call and "store" not in call:
            # Without them its rows could not be planned as they were: nothing would be sent.
            raise InputError(f"step {call['step']} of the plan keeps no store values with its calls (a plan "
                             "written by an earlier pooler) - nothing was sent; plan again.")
        for index, columns in call.get("store") or ():
            found = planned.setdefault(call["step"], Classified(call["step"]))
            found._mark(index, CompareClass.NEW if columns is None else CompareClass.CHANGED)
            if columns is not None:
                was.setdefault(call["step"], {})[index] = columns
    for entry in steps:
        counts = entry.get("compare")
        if isinstance(counts, dict):
            # A step whose rows were all unchanged has no call, and still sends none.  The counts
            # are the whole file's, as the plan told them (a sampled plan's calls are fewer).
            num = int(entry["num"])
            counted = planned.setdefault(num, Classified(num))
            told = (int(counts.get(str(c), 0)) for c in CompareClass)
            counted.new, counted.changed, counted.unchanged = told
    return planned, was


def beyond_sample(planned: Mapping[int, Classified], now: Mapping[int, Classified], sample: int) -> None:
    """A sampled plan's rows after its sample, classed as the store is now: the plan holds no call
    of them, and a run of its task that widens the sample plans them as a run would."""
    for num, current in now.items():
        found = planned.get(num)
        if found is None:
            continue
        for index in current.sent_rows():
            if index >= sample:
                found._mark(index, current.class_of(index))


def _value(value: Any) -> str:
    return "null" if value is None else str(value)


def moved_text(named: str, index: int, was: Columns, now: Columns) -> str:
    """``row 17 (sku G17): price 10.5 in the plan, 12 in the store now``."""
    head = f"row {index} ({named})"
    if was is None and now is None:
        return f"{head}: moved in the store since the plan"
    if was is None:
        assert now is not None
        held = ", ".join(f"{c} {_value(v)}" for c, v in now.items())
        return f"{head}: not in the store in the plan, in the store now ({held})"
    if now is None:
        return f"{head}: in the store in the plan, not in the store now"
    parts = [f"{c} {_value(was.get(c))} in the plan, {_value(now.get(c))} in the store now"
             for c in now if canon(was.get(c)) != canon(now.get(c))]
    return f"{head}: {'; '.join(parts) or 'moved in the store since the plan'}"


def moved_rows(client: ToolRunClient, pool: Pool, values: Mapping[str, Any], *,
               planned: Mapping[int, Classified], was: Mapping[int, Mapping[int, Columns]],
               now: Mapping[int, Classified]) -> dict[int, dict[int, str]]:
    """Each step's planned rows that moved since the plan, with what moved: a class the store gives
    it now that is not the planned one, or compared columns of a changed row that are not those
    the plan saw."""
    steps = {s.num: s for s in pool.steps}
    out: dict[int, dict[int, str]] = {}
    for num, found in planned.items():
        current = now.get(num)
        held = was.get(num, {})
        classed = {i for i in found.sent_rows()
                   if current is None or current.class_of(i) is not found.class_of(i)}
        suspects = classed | set(held)
        read = store_columns(client, pool, steps[num], values, suspects)
        moved: dict[int, str] = {}
        for index in sorted(suspects):
            before, after = held.get(index), read.columns.get(index)
            differs = before is not None and (after is None or any(
                canon(before.get(c)) != canon(after.get(c)) for c in after))
            if index in classed or differs:
                moved[index] = moved_text(read.named.get(index, ""), index, before, after)
        if moved:
            out[num] = moved
    return out


def conflicts(calls: Iterable[Mapping[str, Any]], moved: Mapping[int, Mapping[int, str]]) -> list[Conflict]:
    """The planned calls that send a row that moved, in the plan's order."""
    found: list[Conflict] = []
    for call in calls:
        rows = moved.get(call["step"])
        if not rows:
            continue
        texts = [rows[i] for i, _ in call.get("store") or () if i in rows]
        if texts:
            found.append({"step": call["step"], "call": call["call"], "rows": list(call.get("rows") or ()),
                          "key": call.get("key"), "moved": texts})
    return found


#: How many moved rows of a call a message names; the answer's ``conflicts`` names them all.
NAMED = 5


def moved_list(conflict: Conflict) -> str:
    """The rows that moved, the first ``NAMED`` of them: ``row 17 (sku G17): ...; and 3 more rows``."""
    moved = conflict["moved"]
    more = f"; and {len(moved) - NAMED:,} more rows" if len(moved) > NAMED else ""
    return "; ".join(moved[:NAMED]) + more


def conflict_message(conflict: Conflict) -> str:
    """The entry's message of a call not sent as a conflict."""
    return (f"Not sent: a conflict - {moved_list(conflict)}; plan again (pooler plan), or apply with "
            "--refresh to send it as the store is now.")
