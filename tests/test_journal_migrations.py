"""The SQLite journal's schema: numbered migrations in ``pooler/journal/sqlite/sql/migrations``,
its version in ``PRAGMA user_version``, an older file brought up to date when it is opened
(whatever columns it already had), and a newer one refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import pooler
from test_keys_tasks import OLD_SCHEMA

from pooler.journal.sqlite.file import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from pooler.journal.sqlite.journal import Journal
from pooler.journal.sqlite.tasks import SqliteTaskJournal

#: Every column a journal of the last version has, as the migrations make them.
COLUMNS = {
    "tasks": ["id", "pool_file", "started", "finished", "status", "runs", "total", "succeeded", "failed",
              "skipped", "not_run", "answer", "store", "shared", "halted", "again", "unchanged"],
    "calls": ["id", "task", "run", "num", "row", "key", "round", "step_id", "status", "in_doubt", "sent_at",
              "done_at", "result", "detail", "lane", "serial", "sent_ms", "done_ms"],
    "runs": ["task", "run", "host", "pid"],
    "task_runs": ["task", "run", "started_ms", "store", "mode", "width", "serialize_on", "steps", "again"],
    "plan_files": ["task", "num", "name", "path", "sha256", "rows", "chunk", "first_run"],
    "plan_rows": ["task", "num", "row", "key", "data", "done"],
    "runners": ["id", "task", "host", "pid", "started", "lease_until", "width"],
    "work": ["task", "num", "idx", "kind", "row_first", "row_last", "size", "data", "deps", "serial", "state",
             "runner", "round", "doubted", "key_text", "key_planned", "step_id", "status", "entry", "detail",
             "doubt", "epoch", "sent_ms", "done_ms", "done_run"],
    "table_rows": ["task", "num", "idx", "name", "prefix", "into_job", "rows"],
    "work_epoch": ["id", "value"],
    "buckets": ["task", "name", "tat"],
    "flows": ["id", "task", "run", "runner", "doc"],
    "plans": ["id", "task", "created", "expires", "digest", "arguments", "state", "committed", "host", "pid",
              "answer"],
    "store_buckets": ["store", "tat", "slots"],
    "store_shares": ["store", "task", "tat", "last", "hungry"],
    "compare_rows": ["scope", "num", "side", "idx", "match", "digest"],
}


def shape(path: Path) -> tuple[int, dict[str, list[str]]]:
    db = sqlite3.connect(path)
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return version, {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        db.close()


def test_the_sqlite_journals_version_is_the_number_of_its_last_migration() -> None:
    assert [m.name for m in MIGRATIONS] == ["0001_initial.sql", "0002_task_store.sql", "0003_timeline.sql",
                                            "0004_run_again.sql", "0005_task_plan.sql", "0006_work.sql",
                                            "0007_rate_buckets.sql", "0008_flows.sql", "0009_plans.sql",
                                            "0010_store_rate_buckets.sql", "0011_compare_rows.sql",
                                            "0012_epoch_kept.sql", "0013_failed_calls_found_by_a_seek.sql",
                                            "0014_a_call_done_writes_one_index_less.sql"]
    assert SCHEMA_VERSION == 14


def test_a_new_journal_records_its_version_and_has_every_column(tmp_path: Path) -> None:
    Journal(tmp_path / "j.sqlite").close()
    assert shape(tmp_path / "j.sqlite") == (SCHEMA_VERSION, COLUMNS)


def test_a_new_journal_is_made_in_two_writes_the_switch_to_wal_then_its_mark_and_tables_together(
        tmp_path: Path) -> None:
    # A write before the switch to WAL goes through a rollback journal of its own, at four disk syncs;
    # the header's file change counter (bytes 24-27) counts the writes the file took.
    Journal(tmp_path / "j.sqlite").close()
    header = (tmp_path / "j.sqlite").read_bytes()[:100]
    assert int.from_bytes(header[24:28], "big") == 2
    db = sqlite3.connect(tmp_path / "j.sqlite")
    assert db.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


def test_a_journal_made_before_the_store_and_the_timeline_is_brought_up_to_date(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO tasks (id, pool_file, started) VALUES ('T', '/p.yaml', 'then')")
    db.commit()
    db.close()
    with SqliteTaskJournal(path) as journal:
        row = journal.task("T")
    assert row is not None
    assert (row.id, row.store) == ("T", None)
    assert shape(path) == (SCHEMA_VERSION, COLUMNS)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    db.close()


def test_a_journal_that_added_its_columns_before_it_recorded_a_version_opens_as_it_is(tmp_path: Path) -> None:
    # The journals of earlier pooler versions: every column there, and user_version 0.
    path = tmp_path / "j.sqlite"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for migration in MIGRATIONS:
        db.executescript(migration.sql)
    db.execute("INSERT INTO calls (task, run, num, status, lane) VALUES ('T', 1, 1, 'completed', 3)")
    db.commit()
    assert db.execute("PRAGMA user_version").fetchone() == (0,)
    db.close()
    Journal(path).close()
    assert shape(path) == (SCHEMA_VERSION, COLUMNS)
    db = sqlite3.connect(path)
    assert db.execute("SELECT task, lane FROM calls").fetchall() == [("T", 3)]
    db.close()


def test_a_journal_lacking_a_table_its_version_promises_has_it_made_again(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    Journal(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE task_runs")
    db.commit()
    db.close()
    Journal(path).close()
    assert shape(path) == (SCHEMA_VERSION, COLUMNS)


def test_a_journal_lacking_a_table_gets_it_back_with_the_indexes_and_triggers_later_migrations_made(
        tmp_path: Path) -> None:
    def made_on_work(path: Path) -> list[tuple[str, str]]:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT type, name FROM sqlite_master WHERE tbl_name = 'work' "
                              "AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY 1, 2").fetchall()

    fresh, path = tmp_path / "fresh.sqlite", tmp_path / "j.sqlite"
    Journal(fresh).close()
    Journal(path).close()
    assert ("trigger", "work_epoch_kept") in made_on_work(fresh)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE work")
    db.commit()
    db.close()
    assert made_on_work(path) == []
    Journal(path).close()
    assert shape(path) == (SCHEMA_VERSION, COLUMNS)
    assert made_on_work(path) == made_on_work(fresh)


def test_a_journal_newer_than_this_pooler_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    Journal(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = path.read_bytes()
    listed = pooler("runs", "--journal", str(path))
    assert listed.returncode == 2
    assert listed.stderr == (f"pooler: the journal {path} has schema version {SCHEMA_VERSION + 1}, newer "
                             f"than this pooler's {SCHEMA_VERSION} - run a pooler as new as the one that "
                             "wrote it, or give another file with --journal.\n")
    assert path.read_bytes() == before
