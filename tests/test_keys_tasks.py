"""Keys and tasks through ``pooler run`` against the real reference store: what a keyed call is known
by, which store a task belongs to, which file is a journal, and a sample continued by a full run.
The store's ops (CmdOps) say what it carried out, so a call skipped wrongly or sent twice shows.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from helpers import ROOT, Store, answer_of, pooler

from pooler.run.identity import chunk_key, idempotency_header
from pooler.run.storeid import store_identity

POOLS = ROOT / "pools"


def run(store: Store, tmp_path: Path, pool: Path | str, *extra: str,
        journal: Path | None = None) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", str(journal or tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(tmp_path / "state")})


def keys_of(store: Store, command: str) -> list[str | None]:
    return [op["idempotency_key"] for op in store.ops() if op["command"] == command]


ROUNDS = """\
vars:
  ms: {default: 1}
pool:
  - {name: b, unit: MELBIS_AGENT_TEST, command: CmdEcho, key: INV-100/2, params: {step: b}}
  - {name: a, unit: MELBIS_AGENT_TEST, command: CmdSleep, key: INV-100, params: {ms: "${ms}"}}
"""


def test_a_key_sent_again_never_meets_another_key_of_the_task(store: Store, tmp_path: Path) -> None:
    """``INV-100`` refused once goes out again as its round 2, which is not the header of the step
    keyed ``INV-100/2``: the store runs the command instead of answering with the other's answer."""
    pool = tmp_path / "rounds.yaml"
    pool.write_text(ROUNDS, encoding="utf-8")
    first = run(store, tmp_path, pool, "--task", "T", "--var", "ms=soon")
    assert first.returncode == 1, first.stderr
    assert [s["status"] for s in answer_of(first)["steps"]] == ["completed", "failed"]
    again = run(store, tmp_path, pool, "--task", "T", "--var", "ms=7")
    assert again.returncode == 0, again.stderr
    steps = answer_of(again)["steps"]
    assert [(s["key"], s["status"]) for s in steps] == [("INV-100/2", "skipped"), ("INV-100", "completed")]
    assert steps[1]["detail"] == {"slept": 7}
    assert keys_of(store, "CmdEcho") == ["T:INV-100%2F2"]
    assert keys_of(store, "CmdSleep") == ["T:INV-100/2"]


def goods_refs() -> list[str]:
    with (POOLS / "data" / "goods.csv").open(newline="", encoding="utf-8") as f:
        return [row["ref"] for row in csv.DictReader(f)]


def test_a_sample_then_the_full_run_of_a_chunked_task_imports_every_row_once(
        store: Store, tmp_path: Path) -> None:
    pool = POOLS / "import-chunked.yaml"
    sample = run(store, tmp_path, pool, "--sample", "10", "--task", "IMP")
    assert sample.returncode == 0, sample.stderr
    full = run(store, tmp_path, pool, "--task", "IMP")
    assert full.returncode == 0, full.stderr
    (summary,) = answer_of(full)["steps"]
    assert summary["rows"] == {"total": 1200, "completed": 1190, "skipped": 10, "failed": 0,
                               "in_doubt": 0, "not_run": 0}
    ops = [op for op in store.ops() if op["unit"] == "MELBIS_AGENT_IMPORT_GOODS"]
    # The sampled chunk is cut as it was and skipped; the chunks after it start at row 10.
    assert [op["idempotency_key"] for op in ops] == [
        "IMP:import-from-r0001#0-9", "IMP:import-from-r0011#10-509", "IMP:import-from-r0511#510-1009",
        "IMP:import-from-r1011#1010-1199"]
    sent = [row["ref"] for op in ops for row in op["params"]["goods"]]
    assert sent == goods_refs()
    goods = store.call("MELBIS_AGENT_STORE", "CmdList").json()["data"]["tables"]["goods"]
    assert len(goods) == 1200
    # The job file holds every row's answer once, the sampled ones too.
    job = tmp_path / "out" / "imported.goods.jsonl"
    assert [json.loads(line)["ref"] for line in job.read_text(encoding="utf-8").splitlines()] == goods_refs()


def test_resume_continues_a_sampled_task_with_its_keys(store: Store, tmp_path: Path) -> None:
    """The Quickstart's path: --sample 10, then --resume imports the rest."""
    pool = POOLS / "import.yaml"
    sample = run(store, tmp_path, pool, "--sample", "10")
    assert sample.returncode == 0, sample.stderr
    task = answer_of(sample)["task"]
    listed = pooler("runs", "--journal", str(tmp_path / "journal.sqlite"), "--json")
    assert [(t["id"], t["status"]) for t in json.loads(listed.stdout)["tasks"]] == [(task, "sampled")]
    rest = run(store, tmp_path, pool, "--resume")
    assert rest.returncode == 0, rest.stderr
    answer = answer_of(rest)
    assert answer["task"] == task
    assert answer["steps"][0]["rows"]["skipped"] == 10
    assert answer["steps"][0]["rows"]["completed"] == 1190
    adds = Counter(op["params"]["sku"] for op in store.ops() if op["command"] == "CmdAdd")
    assert len(adds) == 1200
    assert set(adds.values()) == {1}


def test_a_new_task_beside_a_sampled_one_says_how_to_continue_the_sample(
        store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("n\n1\n2\n3\n", encoding="utf-8")
    pool = tmp_path / "rows.yaml"
    pool.write_text("pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, key: 'r-${row.n}', "
                    "for_each: {file: rows.csv}, params: {n: '${row.n}'}}\n", encoding="utf-8")
    sample = run(store, tmp_path, pool, "--sample", "1", "--task", "S")
    assert sample.returncode == 0, sample.stderr
    full = run(store, tmp_path, pool, "--task", "F")
    assert "continues" not in full.stderr
    again = run(store, tmp_path, pool)
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith(
        f"pooler: the last task of {pool}, S, ran a sample (--sample) and this run starts a new task; "
        "--resume continues the sampled one with its keys instead.\n")


KEYED = """\
pool:
  - {name: add, unit: MELBIS_AGENT_CURRENCY, command: CmdAdd, key: add-chf, params: {name: CHF}}
"""


def test_a_task_is_refused_against_another_store(store_factory: Any, tmp_path: Path) -> None:
    test_store: Store = store_factory(db=tmp_path / "test.db", root=tmp_path / "test-root")
    production: Store = store_factory(db=tmp_path / "prod.db", root=tmp_path / "prod-root")
    pool = tmp_path / "keyed.yaml"
    pool.write_text(KEYED, encoding="utf-8")
    first = run(test_store, tmp_path, pool, "--task", "T")
    assert first.returncode == 0, first.stderr
    other = run(production, tmp_path, pool, "--task", "T")
    assert other.returncode == 2
    assert other.stderr == (
        f"pooler: the task T ran against the store {test_store.url}, not {production.url} - a task "
        "belongs to one store: give this run a task id of its own.\n"
        "pooler: refused before the first step; nothing was sent.\n")
    assert production.ops() == []
    # The same store written another way is the same store.
    same = run(test_store, tmp_path, pool, "--task", "T", "--store",
               test_store.url.replace("http://", "HTTP://") + "/")
    assert same.returncode == 0, same.stderr
    assert [s["status"] for s in answer_of(same)["steps"]] == ["skipped"]
    # The task keeps its store in its document, as it was first given.
    journal = sqlite3.connect(tmp_path / "journal.sqlite")
    assert journal.execute("SELECT json_extract(shared, '$.store') FROM tasks").fetchall() == [
        (test_store.url,)]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_sqlite_file_of_another_program_is_not_taken_for_a_journal(store: Store, tmp_path: Path) -> None:
    app = tmp_path / "app.sqlite"
    db = sqlite3.connect(app)
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO users (name) VALUES ('ann')")
    db.commit()
    db.close()
    before = digest(app)
    listed = pooler("runs", "--journal", str(app))
    assert listed.returncode == 2
    assert listed.stderr == (f"pooler: {app} is not a pooler journal (it holds the tables users) - "
                             "pooler leaves it as it is; give a file of pooler's own with --journal.\n")
    pool = tmp_path / "keyed.yaml"
    pool.write_text(KEYED, encoding="utf-8")
    refused = run(store, tmp_path, pool, journal=app)
    assert refused.returncode == 2
    assert store.ops() == []
    assert digest(app) == before
    assert not Path(f"{app}-wal").exists()
    db = sqlite3.connect(app)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert db.execute("SELECT name FROM users").fetchall() == [("ann",)]


OLD_SCHEMA = """
CREATE TABLE tasks (id TEXT PRIMARY KEY, pool_file TEXT NOT NULL, started TEXT NOT NULL, finished TEXT,
    status TEXT NOT NULL DEFAULT 'running', runs INTEGER NOT NULL DEFAULT 1, total INTEGER,
    succeeded INTEGER, failed INTEGER, skipped INTEGER, not_run INTEGER, answer TEXT);
CREATE TABLE calls (id INTEGER PRIMARY KEY, task TEXT NOT NULL, run INTEGER NOT NULL, num INTEGER NOT NULL,
    row INTEGER, key TEXT, round INTEGER NOT NULL DEFAULT 1, step_id TEXT, status TEXT NOT NULL,
    in_doubt INTEGER NOT NULL DEFAULT 0, sent_at TEXT, done_at TEXT, result TEXT, detail TEXT);
"""


def test_a_journal_made_before_tasks_kept_their_store_still_runs(
        store: Store, tmp_path: Path) -> None:
    """A task of a journal that old has no plan of work rows: it is refused, saying to start a new
    task (a task runs only the plan it was made with); a new task in the same journal runs and
    keeps its store."""
    journal = tmp_path / "old.sqlite"
    db = sqlite3.connect(journal)
    db.executescript(OLD_SCHEMA)
    pool = tmp_path / "keyed.yaml"
    pool.write_text(KEYED, encoding="utf-8")
    db.execute("INSERT INTO tasks (id, pool_file, started, status) VALUES ('T', ?, 'then', 'completed')",
               (str(pool.resolve()),))
    db.execute("INSERT INTO calls (task, run, num, key, step_id, status, result) VALUES "
               "('T', 1, 1, 'add-chf', 'T-1-1', 'completed', '{\"result\":true,\"message\":\"added\"}')")
    db.commit()
    db.close()
    again = run(store, tmp_path, pool, "--task", "T", journal=journal)
    assert again.returncode == 2
    assert again.stderr == (
        f"pooler: the task T in {journal} was planned by an earlier version of pooler, before tasks "
        "kept their plan as work rows - it can be shown, not run again: start a new task.\n"
        "pooler: refused before the first step; nothing was sent.\n")
    assert store.ops() == []
    new = run(store, tmp_path, pool, "--task", "U", journal=journal)
    assert new.returncode == 0, new.stderr
    assert [s["status"] for s in answer_of(new)["steps"]] == ["completed"]
    db = sqlite3.connect(journal)
    assert db.execute("SELECT id, json_extract(shared, '$.store') FROM tasks ORDER BY id").fetchall() == [
        ("T", None), ("U", store.url)]


def test_headers_of_keys_and_rounds_are_one_to_one() -> None:
    triples = [(t, k, r) for t in ("T", "T:a", "T/1", "T%3A") for k in
               ("INV-100", "INV-100/2", "a:b", "a%2Fb", "a/b/2", "", "ключ 1", "x#0-9") for r in (1, 2, 3)]
    headers = [idempotency_header(*t) for t in triples]
    assert len(set(headers)) == len(triples)
    assert all(h.isascii() and h.isprintable() and " " not in h for h in headers)
    assert chunk_key("import-from-r0001", 0, 499) == "import-from-r0001#0-499"


def test_a_store_is_known_by_its_url_without_secrets_or_spelling() -> None:
    assert store_identity("HTTPS://user:secret@Shop.Example:443/api/?token=x#f") == "https://shop.example/api"
    assert store_identity("http://shop.example:8080/") == "http://shop.example:8080"
    assert store_identity("http://[::1]:80") == "http://[::1]"
