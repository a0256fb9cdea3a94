"""A task's plan staged during the check's pass, so a run reads each data file once.

The compile step hands every row it checks to a ``PlanStage`` (the ``RowSink`` of
``pool/datafiles.py``), which writes the row as the plan records it (its key masked, its JSON) into
a private SQLite file of its own beside the journal, not into the journal: the check takes as long
as the file, and a write transaction held on the journal that long would stall every other run on
it.  Once the check passed, ``write_plan`` copies a step's staged rows into the task's plan in the
transaction that creates the task, one ``INSERT ... SELECT`` inside SQLite.  A refused check leaves nothing:
the file is removed when the stage closes.

A row holding the value of a secret variable is never staged (its step stays out of the plan, as
``write_plan`` keeps it out); the token is known only once the client is made, so rows holding it
are found when they are copied.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pooler.errors import PoolerError
from pooler.journal.sqlite.journal import Journal
from pooler.pool.model import Step
from pooler.pool.rows import row_encoder
from pooler.pool.variables import render_key
from pooler.redact import Redactor

#: Rows written to the stage a statement at a time.
BATCH = 2000
#: The name the stage is attached under on the journal's connection.
SCHEMA = "plan_stage"


class PlanStage:
    """The rows of every step the check read whole, as the plan will record them."""

    def __init__(self, redactor: Redactor, folder: Path | None = None) -> None:
        self._redactor = redactor
        #: Where the stage's own folder is made: beside the journal, a folder the operator named.
        self._within = folder
        self._scope: ChainMap[str, Any] = ChainMap({}, {})
        self._folder: Path | None = None
        self._db: sqlite3.Connection | None = None
        self._batch: list[tuple[int, int, str | None, str]] = []
        #: Steps read whole, with their row counts; steps whose rows hold a secret.
        self._done: dict[int, int] = {}
        self._secret: set[int] = set()
        self._dumps = row_encoder()

    # The RowSink side, called by the compile step.

    def begin(self, values: Mapping[str, Any], secrets: Iterable[str]) -> None:
        self._scope = ChainMap({}, dict(values))
        for secret in secrets:
            self._redactor.add(secret)

    def row(self, step: Step, index: int, row: dict[str, Any], key: str | None) -> None:
        num = step.num
        if num in self._secret:
            return
        text = self._redactor.text
        if key is None and isinstance(step.key, str):
            self._scope.maps[0]["row"] = row
            try:
                key = render_key(step.key, self._scope)
            except PoolerError:
                key = None  # the call tells what is wrong with its key when it is sent
        encoded = self._dumps(row)
        if text(encoded) != encoded:
            self._secret.add(num)
            return
        self._batch.append((num, index, None if key is None else text(key), encoded))
        if len(self._batch) >= BATCH:
            self._flush()

    def done(self, step: Step, rows: int) -> None:
        self._flush()
        self._done[step.num] = rows

    # The plan's side, called by ``write_plan``.

    @contextmanager
    def attached(self, journal: Journal) -> Iterator[None]:
        """The stage readable on the journal's connection (ATTACH is not allowed in a transaction,
        so this goes around the one that creates the task)."""
        if self._db is None:
            yield
            return
        self._flush()
        if self._db.in_transaction:
            self._db.execute("COMMIT")
        with journal.attached(self._path(), SCHEMA):
            yield

    def copy(self, db: sqlite3.Connection, task: str, num: int) -> int | None:
        """Write the step's staged rows into the task's plan; their count, or None when the step is
        not staged (or its rows hold a secret): the plan then reads the file itself."""
        rows = self._done.get(num)
        if rows is None or num in self._secret or (rows and self._db is None):
            return None
        if not rows:
            return 0
        texts = self._redactor.texts()
        # A secret known only now (the token) is looked for by SQLite; each row it names is
        # masked in Python, which alone knows the rule of whole words.
        holds = " OR ".join(["instr({0}, ?) > 0"] * len(texts)) or "0"
        found = db.execute(f"SELECT data FROM {SCHEMA}.rows WHERE num = ? AND ({holds.format('data')})",
                           (num, *texts))
        text = self._redactor.text
        if any(text(data) != data for (data,) in found):
            return None
        db.create_function("pooler_mask", 1, text, deterministic=True)
        db.execute("INSERT INTO plan_rows (task, num, row, key, data, done) "
                   f"SELECT ?, num, row, CASE WHEN {holds.format('key')} THEN pooler_mask(key) ELSE key END, "
                   f"data, 0 FROM {SCHEMA}.rows WHERE num = ?", (task, *texts, num))
        return rows

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        self._batch.clear()

    def __enter__(self) -> PlanStage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _path(self) -> Path:
        assert self._folder is not None
        return self._folder / "plan.db"

    def _flush(self) -> None:
        if not self._batch:
            return
        if self._db is None:
            # A folder only its owner can read, removed when the stage closes, in the journal's
            # folder (made as the journal makes it): never outside the folders the operator named.
            assert self._within is not None, "a stage is given the journal's folder"
            self._within.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._folder = Path(tempfile.mkdtemp(prefix=".pooler-plan-", dir=self._within))
            self._db = sqlite3.connect(self._path(), isolation_level=None)
            # Nothing here outlives the run: no rollback journal, no syncing to the disk.
            self._db.execute("PRAGMA journal_mode = OFF")
            self._db.execute("PRAGMA synchronous = OFF")
            # No index: rows come in order, and plan_rows' own key orders them when copied.
            self._db.execute("CREATE TABLE rows (num INTEGER NOT NULL, row INTEGER NOT NULL, key TEXT, "
                             "data TEXT NOT NULL)")
            self._db.execute("BEGIN")
        self._db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?)", self._batch)
        self._batch.clear()
