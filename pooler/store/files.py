"""Attachments: checked against the elements, laid out on disk with a row each, cleared away if not taken.

The files go to ``<root>/files/YYYY/MM_DD/HH_MM/files_<entity>_<pos>_<id>.<ext>`` with a row in
``files_<entity>``. While a call writes them it holds that table's lock; another call that finds
the lock taken is refused at once and writes nothing. The lock is held for as long as the files
are arriving (they are streamed from the request to disk), so a slow upload keeps it, as it does
in the store this one stands for.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePath
from typing import Any, Protocol

from pooler.contract.fieldtypes import CastError, cast


class Part(Protocol):
    name: str
    filename: str

    def read(self, size: int = ...) -> bytes: ...


@dataclass(frozen=True)
class Entity:
    table: str
    elements: str
    kinds: tuple[str, ...]


ENTITIES = {"store": Entity("files_store", "goods", ("kBase", "kGallery", "kDoc"))}
KNOWN_KEYS = frozenset({"part", "entity", "elem_id", "kind_key", "real_name"})
_EXT = re.compile(r"\.[A-Za-z0-9]{1,10}")


class AttachmentError(ValueError):
    """The attachments are refused; the text is the message."""


@dataclass
class Entry:
    num: int
    part: str
    entity: Entity
    entity_name: str
    elem_id: int
    kind_key: str
    real_name: str | None
    extra: dict[str, Any]


def check_entries(conn: sqlite3.Connection, raw: list[Any]) -> list[Entry]:
    """Every entry checked before anything is written; raises ``AttachmentError``."""
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for num, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise AttachmentError(f"The entry {num} of files is not an object - each entry is "
                                  f'{{"part": "data_{num}", "entity": "store", "elem_id": <id>}}.')
        part = item.get("part")
        if not isinstance(part, str) or not part:
            raise AttachmentError(f'The entry {num} of files names no part - it needs "part": the name of '
                                  "the request part that holds the file's bytes.")
        if part in seen:
            raise AttachmentError(f"The entries {seen[part]} and {num} of files name the same part "
                                  f"[{part}] - each file travels in its own part.")
        seen[part] = num
        name = item.get("entity")
        if not isinstance(name, str) or not name:
            raise AttachmentError(f"The entry {num} of files needs entity - the table that owns the file: "
                                  f"{', '.join(ENTITIES)}.")
        entity = ENTITIES.get(name)
        if entity is None:
            raise AttachmentError(f"Unknown element entity: {name}")
        try:
            elem_id = cast("int", item.get("elem_id"))
        except CastError:
            raise AttachmentError(f"The entry {num} of files needs elem_id - the id of the row the file "
                                  "belongs to, a number.") from None
        if conn.execute(f"SELECT 1 FROM {entity.elements} WHERE id = ?", (elem_id,)).fetchone() is None:
            raise AttachmentError(f"Element not found: {name} id {elem_id}")
        kind = item.get("kind_key")
        kind = "kBase" if kind is None else kind
        if kind not in entity.kinds:
            raise AttachmentError(f"No group [{kind}] among the files of {name} - its groups: "
                                  f"{', '.join(entity.kinds)}.")
        real = item.get("real_name")
        extra = {k: v for k, v in item.items() if k not in KNOWN_KEYS}
        entries.append(Entry(num, part, entity, name, elem_id, kind, real if isinstance(real, str) else None,
                             extra))
    return entries


class Attachments:
    """Lays out the files of calls under ``root``; one lock per files table."""

    def __init__(self, root: Path, max_kb: int | None = None) -> None:
        self.root = root
        self.max_kb = max_kb
        self._locks = {e.table: threading.Lock() for e in ENTITIES.values()}

    def lay_out(self, conn: sqlite3.Connection, entries: list[Entry],
                parts: Iterable[Part] | None) -> list[dict[str, Any]]:
        """Writes the files arriving in ``parts``; their rows, in entry order.

        Raises ``AttachmentError`` with nothing left written; any other error leaves nothing written too.
        """
        taken: list[threading.Lock] = []
        try:
            for table in sorted({e.entity.table for e in entries}):
                lock = self._locks[table]
                if not lock.acquire(blocking=False):
                    raise AttachmentError(f"The table {table} is in work right now, and nothing was "
                                          "written - call again in a moment.")
                taken.append(lock)
            rows: dict[str, dict[str, Any]] = {}
            try:
                self._write(conn, entries, parts, rows)
            except BaseException:
                self.remove(conn, list(rows.values()))
                raise
            return [rows[e.part] for e in entries]
        finally:
            for lock in taken:
                lock.release()

    def _write(self, conn: sqlite3.Connection, entries: list[Entry], parts: Iterable[Part] | None,
               rows: dict[str, dict[str, Any]]) -> None:
        by_part = {e.part: e for e in entries}
        now = datetime.now()
        rel = now.strftime("files/%Y/%m_%d/%H_%M/")
        limit = self.max_kb * 1024 if self.max_kb is not None and len(entries) > 1 else None
        total = 0
        for part in parts if parts is not None else ():
            entry = by_part.get(part.name)
            if entry is None or entry.part in rows:
                continue
            row = self._new_row(conn, entry, part.filename, rel, now)
            rows[entry.part] = row
            path = self.root / rel / row["file_name"]
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as out:
                while chunk := part.read():
                    total += len(chunk)
                    self._within(total, limit)
                    out.write(chunk)
            row["size"] = path.stat().st_size
            conn.execute(f"UPDATE {entry.entity.table} SET size = ? WHERE id = ?", (row["size"], row["id"]))
        for entry in entries:
            if entry.part not in rows:
                raise AttachmentError(f"The entry {entry.num} of files names the part [{entry.part}], and "
                                      "the call carries no such part - nothing was written.")

    def _within(self, total: int, limit: int | None) -> None:
        if limit is not None and total > limit:
            raise AttachmentError(f"These files come to more than {self.max_kb} KB together - if the command "
                                  "takes every file separately, send them in smaller batches; otherwise "
                                  "raise --max-file-kb.")

    def _new_row(self, conn: sqlite3.Connection, entry: Entry, filename: str, rel: str,
                 now: datetime) -> dict[str, Any]:
        table = entry.entity.table
        base = PurePath(filename.replace("\\", "/")).name
        real = entry.real_name or base or entry.part
        ext = PurePath(base or real).suffix
        ext = ext.lower() if _EXT.fullmatch(ext) else ""
        last = f"SELECT COALESCE(MAX(pos), 0) + 1 FROM {table} WHERE elem_id = ? AND kind_key = ?"
        pos = conn.execute(last, (entry.elem_id, entry.kind_key)).fetchone()[0]
        created = now.strftime("%Y-%m-%d %H:%M:%S")
        cur = conn.execute(f"INSERT INTO {table} (elem_id, kind_key, path, real_name, pos, created, extra) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (entry.elem_id, entry.kind_key, rel, real, pos, created,
                            json.dumps(entry.extra, ensure_ascii=False)))
        row_id = cur.lastrowid
        file_name = f"{table}_{pos}_{row_id}{ext}"
        conn.execute(f"UPDATE {table} SET file_name = ? WHERE id = ?", (file_name, row_id))
        return {**entry.extra, "entity": entry.entity_name, "id": row_id, "elem_id": entry.elem_id,
                "kind_key": entry.kind_key, "file_name": file_name, "path": rel, "real_name": real,
                "size": 0, "pos": pos, "created": created}

    def remove(self, conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
        """Deletes the rows and their files."""
        for row in rows:
            entity = ENTITIES[row["entity"]]
            conn.execute(f"DELETE FROM {entity.table} WHERE id = ?", (row["id"],))
            (self.root / row["path"] / row["file_name"]).unlink(missing_ok=True)
