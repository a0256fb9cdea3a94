"""Rows written into SQLite a batch at a time, each batch one statement over a JSON array, by a thread
while the caller makes the next (``pooler/pool/batches.py``): the SQLite journal's bulk writes and the
key set's temporary database.  What lands is what executemany would have written; a batch that fails
is raised to the caller; the caller's own statement waits for the batches handed over."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pooler.errors import JournalError
from pooler.journal.sqlite.journal import BULK_BATCH, Journal
from pooler.pool.batches import BatchWriter, json_rows

TABLE = "CREATE TABLE t (a, b, c, d, e, f)"
INSERT = "INSERT INTO t (a, b, c, d, e, f) VALUES (?, ?, '[' || trim(?, '{}') || ']', ?, ?, ?)"


def stored(db: sqlite3.Connection) -> list[tuple[object, ...]]:
    return db.execute("SELECT a, typeof(a), b, typeof(b), c, d, typeof(d), e, typeof(e), f, typeof(f) "
                      "FROM t ORDER BY rowid").fetchall()


@pytest.mark.parametrize("rows", [
    # Every column alike but one: the alike ones are written into the statement.
    [("it's", 1, "{1,2}", None, True, f"row {i} \u00e9 \"q\" ?") for i in range(5)],
    # Nothing alike; 1, True and 1.0 are equal, and are different values still.
    [("a", 1, "{}", None, True, "x"), ("b", True, "{3}", "n", 1, "y"), ("c", 2, "{}", 7, False, None)],
    # One row: every value bound.
    [("o'ne", -(2**63), "{}", 2**63 - 1, None, "")],
])
def test_a_batch_lands_as_executemany_would_write_it(rows: list[tuple[object, ...]]) -> None:
    plain, batched = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for db in (plain, batched):
        db.execute(TABLE)
    plain.executemany(INSERT, rows)
    batched.execute(*json_rows(INSERT, rows))
    assert stored(batched) == stored(plain)


def test_the_values_alike_in_every_row_are_not_repeated_in_the_array() -> None:
    rows = [("task", 3, "{1}", i, "ready", f"key-{i}") for i in range(3)]
    sql, (array,) = json_rows(INSERT, rows)
    assert array == '[[0,"key-0"],[1,"key-1"],[2,"key-2"]]'
    assert "'task', 3, '[' || trim('{1}', '{}') || ']'" in sql
    assert sql.endswith("FROM json_each(?)")


def test_a_batch_that_fails_on_the_thread_is_raised_to_the_caller_and_stops_the_rest() -> None:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE t (a NOT NULL, b, c, d, e, f)")

    def write() -> None:
        with BatchWriter(2, INSERT, db.execute) as writer:
            for i in range(10):
                # The second batch holds a NULL where the table takes none.
                writer.add((None if i == 3 else i, 1, "{}", None, None, None))

    with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):
        write()
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] < 10


def test_the_callers_own_statement_waits_for_the_batches_handed_over(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    try:
        with journal.transaction() as db, db.bulk("compare_put") as write:
            for i in range(2 * BULK_BATCH + 1):
                write(("scope", 1, 0, i, f"m{i}", f"d{i}"))
            # Two batches handed to the thread, the row after them not yet: a read of the caller's
            # own sees the two whole.
            assert db.query("SELECT count(*) FROM compare_rows")[0][0] == 2 * BULK_BATCH
        assert journal.query("SELECT count(*), count(DISTINCT idx) FROM compare_rows") == [
            (2 * BULK_BATCH + 1, 2 * BULK_BATCH + 1)]
    finally:
        journal.close()


def test_a_bulk_write_that_fails_is_told_as_the_journals_error_and_leaves_nothing(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    try:

        def write() -> None:
            with journal.transaction() as db, db.bulk("compare_put") as add:
                for i in range(3 * BULK_BATCH):
                    add(("scope", 1, 0, i, None if i == BULK_BATCH + 7 else f"m{i}", f"d{i}"))

        with pytest.raises(JournalError, match="NOT NULL"):
            write()
        assert journal.query("SELECT count(*) FROM compare_rows") == [(0,)]
    finally:
        journal.close()
