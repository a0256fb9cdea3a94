"""The answer (contract §3) and its entries (their types: ``pooler.journal.documents``): their
keys written once, and the entries every run makes without a store's answer (a call not sent, a
step not run because of a reference, a key counted done without its answer).

An entry is open: a store's extra keys join it beside these (``Entry`` names the ones pooler
writes).  The single-host run and the shared runner build their entries here alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from pooler.journal.documents import Entry, InDoubtItem
from pooler.statuses import CallStatus

#: What a probe can say of its call in doubt, as entries and counts name it.
LANDED, NOT_LANDED, UNSETTLED = "landed", "not landed", "unsettled"
VERDICTS = (LANDED, NOT_LANDED, UNSETTLED)

#: What names a step in an entry.
HEAD_KEYS = ("num", "name", "unit", "command")
#: What a store's answer gives an entry.
ANSWER_KEYS = ("result", "message", "detail", "tables", "files")
#: What tells a call apart from the other calls of its task, and how it ended.
IDENTITY_KEYS = frozenset({*HEAD_KEYS, "row", "rows", "status", "key", "step_id", "in_doubt"})
#: The keys of an entry that are not the call's result.
ENTRY_KEYS = frozenset(Entry.__required_keys__ | Entry.__optional_keys__) - {"detail", "tables", "files"}

#: How a step a step refers to ended, as the entry of the step not run says it.
_WHY: dict[str, str] = {CallStatus.FAILED: "failed", CallStatus.IN_DOUBT: "is in doubt",
                        CallStatus.NOT_RUN: "was not run"}


def head(num: int, name: str, unit: str, command: str, *, row: int | None = None,
         last: int | None = None) -> Entry:
    """The head of an entry: its step, and its row or its chunk's rows for a call over rows."""
    out: Entry = {"num": num, "name": name, "unit": unit, "command": command}
    if last is not None:
        out["rows"] = [row or 0, last]
    elif row is not None:
        out["row"] = row
    return out


def head_of(entry: Mapping[str, Any]) -> Entry:
    """The head of the step an entry (or a step's document) stands for, without its row."""
    return cast(Entry, {k: entry.get(k) for k in HEAD_KEYS})


#: A call refused before it was sent has no step id in its entry (one found in doubt has, even null).
_NO_STEP_ID: Any = object()


def not_sent(of: Entry, status: str, key: str | None, message: str, *,
             step_id: str | None = _NO_STEP_ID) -> Entry:
    """A call ended without an answer of the store: refused before sending, or found in doubt."""
    entry: Entry = {**of, "status": status, "key": key}
    if step_id is not _NO_STEP_ID:
        entry["step_id"] = step_id
    entry.update({"result": False, "message": message})
    return entry


def not_run(of: Entry, key: str | None, dep_name: str, dep_num: int, dep_status: str) -> Entry:
    """A step not run because a step it refers to did not complete."""
    why = _WHY.get(dep_status, "did not complete")
    return {**of, "status": CallStatus.NOT_RUN, "key": key, "result": False,
            "message": f"Not run: it refers to @{dep_name} (step {dep_num}), which {why}."}


def counted_done(of: Entry, key: str | None, step_id: str | None, message: str) -> Entry:
    """A key found in doubt and counted done without its answer (``--in-doubt skip``)."""
    return {**of, "status": CallStatus.SKIPPED, "key": key, "step_id": step_id, "in_doubt": True,
            "result": True, "message": message}


def in_doubt_item(entry: Mapping[str, Any], action: str, step_id: str | None) -> InDoubtItem:
    item: InDoubtItem = {"num": entry["num"], "name": entry["name"]}
    if "row" in entry:
        item["row"] = entry["row"]
    if "rows" in entry:
        item["rows"] = entry["rows"]
    item.update({"key": entry.get("key"), "step_id": step_id, "action": action})
    return item


def where(entry: Mapping[str, Any]) -> str:
    """``row 3`` or ``rows 0-499`` for a call of a step over rows, else ``""``."""
    rows = entry.get("rows")
    if isinstance(rows, list) and len(rows) == 2:
        return f"rows {rows[0]}-{rows[1]}"
    if entry.get("row") is not None:
        return f"row {entry['row']}"
    return ""
