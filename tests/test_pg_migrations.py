"""A PostgreSQL journal's schema: numbered migrations, a version that changes with the schema, and a
journal lacking what its version promises refused before anything is planned, saying what to run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler
from sharedkit import query

from pooler.errors import JournalError
from pooler.journal.migrations import promised, read_migrations
from pooler.journal.postgres.schema import (
    MIGRATIONS,
    MIGRATIONS_DIR,
    SCHEMA_VERSION,
    absent,
    connect,
    upgrade,
)

pytestmark = pytest.mark.postgres

UPGRADE = "pooler journal upgrade --journal {url} (stop every runner of it first)"


def old_journal(url: str) -> None:
    """The journal an earlier pooler made: schema version 1, its tables, no claim functions."""
    with connect(url) as conn:
        conn.execute(MIGRATIONS[0].sql)
        conn.execute("INSERT INTO pooler_meta (name, value) VALUES ('schema_version', '1')")


def run(store: Store, url: str, tmp_path: Path) -> tuple[int, dict[str, Any], str]:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 1}, key: echo-1}\n")
    token = tmp_path / "token"
    token.write_text(store.token)
    token.chmod(0o600)
    proc = pooler("run", str(pool), "--store", store.url, "--token-file", str(token), "--journal", url,
                  "--task", "t-1", "--out", str(tmp_path / "out"), "--json")
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_the_schema_version_is_the_number_of_the_last_migration() -> None:
    names = sorted(p.name for p in MIGRATIONS_DIR.glob("*.sql"))
    assert names == ["0001_initial.sql", "0002_claim_functions.sql", "0003_fair_share_and_fencing.sql",
                     "0004_run_again.sql", "0005_claim_and_gate.sql", "0006_in_doubt_ruled_by_the_runner.sql",
                     "0007_beyond_the_sample_waits_for_no_one.sql",
                     "0008_a_value_a_reference_gives_is_held_across_runners.sql", "0009_rate_buckets.sql",
                     "0010_flows.sql", "0011_a_step_waits_only_for_the_steps_it_refers_to.sql",
                     "0012_store_rate_buckets.sql", "0013_compare_rows.sql",
                     "0014_the_claim_written_once.sql",
                     "0015_a_claim_reads_only_the_steps_it_weighs.sql",
                     "0016_a_claim_seeks_the_first_ready_call.sql"]
    assert SCHEMA_VERSION == 16
    assert [m.number for m in MIGRATIONS] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    assert MIGRATIONS[13].dropped == ("pooler_claim", "pooler_claim_gate", "pooler_done", "pooler_run_again",
                                      "pooler_share")
    assert promised(MIGRATIONS) == ["pooler_entry_with"]
    assert MIGRATIONS[10].functions == ("pooler_claim_gate",)
    assert MIGRATIONS[7].functions == ("pooler_claim_gate",)
    assert MIGRATIONS[5].functions == ("pooler_run_again", "pooler_done")
    assert MIGRATIONS[5].columns == (("work", "done_run"), ("tasks", "again"))
    assert MIGRATIONS[3].functions == ("pooler_entry_with", "pooler_run_again")
    assert MIGRATIONS[1].functions == ("pooler_claim", "pooler_done")
    assert MIGRATIONS[4].functions == ("pooler_claim_gate", "pooler_claim")
    assert MIGRATIONS[4].columns == (("work", "key_planned"),)
    assert MIGRATIONS[0].tables == ("pooler_meta", "tasks", "runners", "work", "table_rows")


def test_migrations_numbered_with_a_gap_are_refused(tmp_path: Path) -> None:
    shutil.copy(MIGRATIONS_DIR / "0001_initial.sql", tmp_path / "0001_initial.sql")
    (tmp_path / "0003_later.sql").write_text("SELECT 1;\n")
    with pytest.raises(RuntimeError, match=r"numbered \[1, 3\], not 1 to 2"):
        read_migrations(tmp_path)


def test_a_journal_of_version_1_without_the_claim_functions_is_refused_before_anything_is_planned(
        store: Store, pg_url: str, tmp_path: Path) -> None:
    old_journal(pg_url)
    code, document, stderr = run(store, pg_url, tmp_path)
    told = (f"the journal {pg_url} has schema version 1, this pooler needs 16 - upgrade it with: "
            + UPGRADE.format(url=pg_url))
    assert code == 2
    assert [p["message"] for p in document["problems"]] == [told]
    assert stderr == f"pooler: {told}\npooler: refused before the first step; nothing was sent.\n"
    # Nothing planned, no task left running, nothing sent.
    assert query(pg_url, "SELECT id, status FROM tasks") == []
    assert query(pg_url, "SELECT count(*) FROM work") == [(0,)]
    assert store.ops() == []

    upgraded = pooler("journal", "upgrade", "--journal", pg_url)
    assert upgraded.stdout == f"upgraded the journal {pg_url} from schema version 1 to 16\n"
    with connect(pg_url) as conn:
        assert absent(conn) == set()
    code, answer, _ = run(store, pg_url, tmp_path)
    assert code == 0
    assert answer["status"] == "completed"
    assert query(pg_url, "SELECT id, status FROM tasks") == [("t-1", "completed")]
    assert len(store.ops()) == 1


def test_a_journal_that_lacks_a_function_its_version_promises_is_refused_and_upgrade_remakes_it(
        store: Store, pg_url: str, tmp_path: Path) -> None:
    upgrade(pg_url)
    with connect(pg_url) as conn:
        conn.execute("DROP FUNCTION pooler_entry_with")
    code, document, _ = run(store, pg_url, tmp_path)
    assert code == 2
    assert [p["message"] for p in document["problems"]] == [
        f"the journal {pg_url} has schema version 16 but lacks pooler_entry_with() - upgrade it with: "
        + UPGRADE.format(url=pg_url)]
    assert query(pg_url, "SELECT count(*) FROM tasks") == [(0,)]

    repaired = pooler("journal", "upgrade", "--journal", pg_url)
    assert repaired.stdout == (f"repaired the journal {pg_url} at schema version 16: made "
                               "pooler_entry_with() again\n")
    # The migrations after the one that made it ran again too: what a later one drops stays dropped.
    with connect(pg_url) as conn:
        assert absent(conn) == set()
    assert query(pg_url, "SELECT proname FROM pg_proc WHERE proname LIKE 'pooler%%' ORDER BY 1") == [
        ("pooler_entry_with",)]
    assert run(store, pg_url, tmp_path)[0] == 0


def test_a_journal_that_lacks_a_table_is_refused_by_runs_and_show_too(pg_url: str) -> None:
    upgrade(pg_url)
    with connect(pg_url) as conn:
        conn.execute("DROP TABLE table_rows")
    told = (f"pooler: the journal {pg_url} has schema version 16 but lacks table_rows - upgrade it with: "
            + UPGRADE.format(url=pg_url) + "\n")
    for args in (["runs"], ["show", "t-1"], ["gather", "t-1", "--out", "/nonexistent/x"]):
        proc = pooler(*args, "--journal", pg_url)
        assert (proc.returncode, proc.stderr) == (2, told)


def test_each_migration_is_one_transaction_and_a_failed_one_leaves_the_version_before_it(
        pg_url: str, tmp_path: Path) -> None:
    shutil.copy(MIGRATIONS_DIR / "0001_initial.sql", tmp_path / "0001_initial.sql")
    (tmp_path / "0002_broken.sql").write_text("CREATE TABLE half_made (id INTEGER);\nSELECT 1 / 0;\n")
    with pytest.raises(JournalError) as caught:
        upgrade(pg_url, read_migrations(tmp_path))
    assert caught.value.message == f"the upgrade of the journal {pg_url} failed: division by zero"
    assert query(pg_url, "SELECT value FROM pooler_meta WHERE name = 'schema_version'") == [("1",)]
    assert query(pg_url, "SELECT to_regclass('half_made') IS NULL") == [(True,)]
