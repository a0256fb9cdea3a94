"""Each backend's queries live as SQL in its ``sql/queries.sql``, under ``-- name:`` lines: every
one is used by the code, and every one the code asks for is there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pooler.journal.prune import OF_A_TASK
from pooler.journal.queries import read_queries
from pooler.journal.tasks import AGAIN, REDRIVE

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = sorted(p.parent.parent for p in (ROOT / "pooler" / "journal").glob("*/sql/queries.sql"))


#: How the code asks for a named query: through a connector (``db.one("name", ...)``, or in a
#: batch: ``db.batch([..., ("name", ...)])``), or by its text (``SQL["name"]``).
ASKED = re.compile(r'\.(?:one|all|stream|execute|bulk|finish)\(\s*"([a-z]\w*)"|\bSQL\["(\w+)"\]'
                   r'|\.batch\(\[[^\]]*?\(\s*"([a-z]\w*)"')


def asked_for() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "pooler").rglob("*.py"):
        found.update(a or b or c for a, b, c in ASKED.findall(path.read_text(encoding="utf-8")))
    # The statements run by a list of names: a run again's, a redrive's, a prune's.
    return found | set(AGAIN) | set(REDRIVE) | {f"prune_{table}" for table in OF_A_TASK}


def one_implementation() -> set[str]:
    """The queries the journal's one implementation asks for (the modules of pooler/journal/ itself,
    not a backend's)."""
    found: set[str] = set(AGAIN) | set(REDRIVE)
    for path in (ROOT / "pooler" / "journal").glob("*.py"):
        if path.name != "prune.py":  # pruning is a SQLite file's
            found.update(a or b or c for a, b, c in ASKED.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_named_query_is_used_and_every_query_used_is_named() -> None:
    named: set[str] = set()
    for backend in BACKENDS:
        named |= set(read_queries(backend / "sql" / "queries.sql"))
    assert BACKENDS
    assert named - asked_for() == set(), "queries no code uses"
    assert asked_for() - named == set(), "queries the code asks for that no file names"


def test_every_query_the_one_implementation_asks_for_is_named_by_both_backends() -> None:
    asked = one_implementation()
    assert {"claim_state", "take_calls", "done_call", "record_call", "report_calls"} <= asked
    for backend in BACKENDS:
        assert asked - set(read_queries(backend / "sql" / "queries.sql")) == set(), backend.name


def test_a_query_is_its_statement_without_comments_or_semicolon(tmp_path: Path) -> None:
    path = tmp_path / "queries.sql"
    path.write_text("-- the file's own comment\n\n-- name: one\n-- why it reads this\nSELECT 1\n  FROM t;\n\n"
                    "-- name: two\nDELETE FROM t WHERE a = ?;\n", encoding="utf-8")
    assert read_queries(path) == {"one": "SELECT 1 FROM t", "two": "DELETE FROM t WHERE a = ?"}


def test_a_query_takes_in_another_of_the_file_whole_where_it_names_it(tmp_path: Path) -> None:
    path = tmp_path / "queries.sql"
    path.write_text("-- name: one\nSELECT a FROM t;\n\n-- name: both\n-- one, beside what it weighs\n"
                    "SELECT * FROM ({{one}}) x JOIN (SELECT 1 AS b) y ON true;\n", encoding="utf-8")
    assert read_queries(path) == {"one": "SELECT a FROM t",
                                  "both": "SELECT * FROM (SELECT a FROM t) x JOIN (SELECT 1 AS b) y ON true"}


def test_a_name_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "queries.sql"
    path.write_text("-- name: one\nSELECT 1;\n-- name: one\nSELECT 2;\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="the query one is named twice"):
        read_queries(path)
