"""``--replan`` of a task on PostgreSQL: its plan in one transaction under the task's lock, refused
while any runner holds the task (``pooler.journal.work.Replanning``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pooler.errors import JournalError
from pooler.journal.lease import live_runners
from pooler.journal.postgres.journal import WORK_TYPES, PgJournal
from pooler.journal.postgres.schema import SQL


class PgReplanning:
    """The task's calls as ``--replan`` reads and rewrites them, on the transaction's connection."""

    def __init__(self, db: Any, task: str) -> None:
        self.db = db
        self.task = task

    def step_calls(self, num: int) -> list[tuple[Any, ...]]:
        return list(self.db.execute(SQL["step_calls"], (self.task, num)).fetchall())

    def drop_calls(self, num: int, idxs: list[int]) -> None:
        self.db.execute(SQL["drop_calls"], (self.task, num, idxs))

    def write(self, rows: Iterable[tuple[Any, ...]]) -> None:
        with self.db.cursor().copy(SQL["copy_work"]) as copy:
            copy.set_types(WORK_TYPES)
            for values in rows:
                copy.write_row(values)

    def set_round(self, rnd: int, num: int, idx: int) -> None:
        self.db.execute(SQL["set_round"], (rnd, self.task, num, idx))

    def update_doc(self, doc: dict[str, Any]) -> None:
        from psycopg.types.json import Jsonb  # noqa: PLC0415

        self.db.execute(SQL["update_shared"], (Jsonb(doc), self.task))


@contextmanager
def replanning(journal: PgJournal, task: str) -> Iterator[PgReplanning]:
    with journal.raw_transaction() as db:
        db.execute(SQL["lock_task"], (task,))
        db.execute(SQL["lock_shared"], (task,))
        if live_runners(journal.db, task):
            raise JournalError(f"--replan refused for task {task}: runners still hold it - run it with "
                               "--replan once they have ended.")
        yield PgReplanning(db, task)
