"""No secret leaves the process: the token and secret variables are known strings, and every byte
pooler prints or writes (stdout, stderr, the --log file, table and job files, the journal, the lock
file) is searched for them.  The store really receives them and echoes them back, so every mask
seen here is one pooler applied.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, answer_of, pooler

from pooler.client.http import ToolRunClient
from pooler.journal.sqlite.tasks import SqliteTaskJournal as Journal
from pooler.pool.loader import load_pool
from pooler.redact import Redactor
from pooler.run.config import RunConfig
from pooler.run.executor import run_pool

TOKEN = "tok-LEAK-5f2c9e71"
SIG = "SIG-leak-8d1b40"  # from the environment: a secret without saying so
PIN = "PIN-leak-3a7e66"  # declared secret: true, given in a vars file
SECRETS = (TOKEN, SIG, PIN)
TEST = "MELBIS_AGENT_TEST"

POOL = {
    "vars": {"sig": {"env": "SHOP_SIG"}, "pin": {"secret": True}},
    "stop_on_error": False,
    "pool": [
        {"name": "e", "unit": TEST, "command": "CmdEcho", "key": "echo-${sig}", "into": "job",
         "params": {"a": "${sig}", "b": "x ${pin} y", "deep": {"list": ["${pin}"]}}},
        {"name": "copy", "unit": TEST, "command": "CmdEcho", "params": {"again": "@e.a"}},
        {"name": "goods", "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd",
         "params": {"sku": "S-${pin}", "name": "${sig}"}},
        {"name": "list", "unit": "MELBIS_AGENT_STORE", "command": "CmdList", "into": "job"},
        # The store's refusal quotes the value it was given.
        {"name": "bad", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
         "params": {"name": "n", "pos": "${sig}"}},
        # A reference that cannot be resolved: pooler's own refusal, never sent.
        {"name": "missing", "unit": TEST, "command": "CmdEcho", "params": {"x": "@e.nope", "s": "${pin}"}},
    ],
}


@pytest.fixture
def secret_store(store_factory: Any) -> Store:
    store: Store = store_factory("--token", TOKEN)
    return store


def setup_run(tmp_path: Path, pool: dict[str, Any]) -> tuple[Path, list[str]]:
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
    (tmp_path / "vars.yaml").write_text(f"pin: {PIN}\n", encoding="utf-8")
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(pool), encoding="utf-8")
    return path, ["--token-file", str(tmp_path / "token"), "--vars-file", str(tmp_path / "vars.yaml"),
                  "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "state" / "journal.sqlite"),
                  "--log", str(tmp_path / "run.log")]


def run(store: Store, tmp_path: Path, pool: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    path, options = setup_run(tmp_path, pool)
    return pooler("run", str(path), "--store", store.url, *options, *extra, env={"SHOP_SIG": SIG})


def written(tmp_path: Path) -> Iterator[Path]:
    """Every file pooler wrote: under --out, beside the journal (the journal, its WAL, locks), the log."""
    for folder in (tmp_path / "out", tmp_path / "state"):
        yield from (p for p in folder.rglob("*") if p.is_file())
    if (tmp_path / "run.log").exists():
        yield tmp_path / "run.log"


def assert_no_secret(tmp_path: Path, proc: subprocess.CompletedProcess[str]) -> None:
    for secret in SECRETS:
        assert secret not in proc.stdout
        assert secret not in proc.stderr
        for path in written(tmp_path):
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"


def test_no_secret_reaches_any_output_or_file(secret_store: Store, tmp_path: Path) -> None:
    proc = run(secret_store, tmp_path, POOL, "--json")
    assert proc.returncode == 1, proc.stderr
    assert_no_secret(tmp_path, proc)
    names = {p.name for p in written(tmp_path)}
    assert {"journal.sqlite", "job.goods.jsonl", "step4.MELBIS_AGENT_STORE.CmdList.goods.jsonl",
            "run.log"} <= names

    # The store got the real values: every *** below is pooler's doing.
    ops = secret_store.ops()
    assert ops[0]["params"] == {"a": SIG, "b": f"x {PIN} y", "deep": {"list": [PIN]}}
    assert ops[0]["idempotency_key"].endswith(f":echo-{SIG}")
    assert ops[1]["params"] == {"again": SIG}

    steps = {e["name"]: e for e in answer_of(proc)["steps"]}
    assert steps["e"]["key"] == "echo-***"
    assert steps["e"]["detail"] == {"a": "***", "b": "x *** y", "deep": {"list": ["***"]}}
    assert steps["copy"]["detail"] == {"again": "***"}
    assert steps["goods"]["detail"]["row"]["sku"] == "S-***"
    assert steps["list"]["tables"]["goods"]["head"][0].startswith('{"id":1,"sku":"S-***","name":"***"')
    assert (steps["bad"]["status"], steps["bad"]["message"]) == (
        "failed", 'The field [pos] of the command [CmdAdd] takes int: "***" is not a whole number.')
    assert steps["missing"]["status"] == "failed"
    assert steps["missing"]["message"].endswith(
        ": @e.nope names a field the detail of that step does not have. The detail has a, b, deep.")

    job = (tmp_path / "out" / "job.goods.jsonl").read_text().splitlines()
    assert [json.loads(line)["name"] for line in job] == ["***"]
    log = (tmp_path / "run.log").read_text()
    assert "key echo-***" in log
    assert '"***" is not a whole number' in log
    with sqlite3.connect(tmp_path / "state" / "journal.sqlite") as db:
        first = db.execute("SELECT key, detail FROM calls ORDER BY id LIMIT 1").fetchone()
    assert (first[0], json.loads(first[1])["a"]) == ("echo-***", "***")


def test_a_rerun_skips_the_masked_key_and_still_leaks_nothing(secret_store: Store, tmp_path: Path) -> None:
    first = run(secret_store, tmp_path, POOL, "--json", "--task", "t")
    assert first.returncode == 1
    again = run(secret_store, tmp_path, POOL, "--json", "--task", "t")
    assert again.returncode == 1
    assert answer_of(again)["steps"][0]["status"] == "skipped"
    assert_no_secret(tmp_path, again)
    # The keyed call ran once: the masked key in the journal still told it apart.
    assert sum(op["params"].get("a") == SIG for op in secret_store.ops()) == 1


def test_a_dry_run_shows_the_plan_with_secrets_masked(secret_store: Store, tmp_path: Path) -> None:
    for extra in ((), ("--json",)):
        proc = run(secret_store, tmp_path, POOL, "--dry-run", *extra)
        assert proc.returncode == 0, proc.stderr
        assert "***" in proc.stdout
        assert_no_secret(tmp_path, proc)
    assert secret_store.ops() == []


def test_a_refusal_that_quotes_a_secret_masks_it(secret_store: Store, tmp_path: Path) -> None:
    twins = {**POOL, "pool": [{"unit": TEST, "command": "CmdEcho", "key": "k-${sig}"},
                              {"unit": TEST, "command": "CmdEcho", "key": "k-${sig}"}]}
    proc = run(secret_store, tmp_path, twins)
    assert proc.returncode == 2
    assert "Two steps carry the key [k-***] - steps 1 and 2" in proc.stderr
    assert_no_secret(tmp_path, proc)
    assert secret_store.ops() == []


def test_a_refused_token_is_not_shown(secret_store: Store, tmp_path: Path) -> None:
    (tmp_path / "wrong").write_text("tok-WRONG-91ac33\n", encoding="utf-8")
    path, _ = setup_run(tmp_path, {"pool": [{"unit": TEST, "command": "CmdEcho"}]})
    proc = pooler("run", str(path), "--store", secret_store.url, "--token-file", str(tmp_path / "wrong"),
                  "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "state" / "j.sqlite"),
                  "--log", str(tmp_path / "run.log"), "--json")
    assert proc.returncode == 1
    assert answer_of(proc)["steps"][0]["message"] == (
        "ACCESS_DENIED: the token is not known to this store (HTTP 401 Unauthorized)")
    for where in (proc.stdout, proc.stderr, *(p.read_bytes().decode("utf-8", "replace")
                                              for p in written(tmp_path))):
        assert "tok-WRONG-91ac33" not in where


def test_the_engine_masks_what_it_writes_behind_any_client(store: Store, tmp_path: Path) -> None:
    """run_pool as a library, with a plain client: its own redactor keeps the files clean."""
    pool_file = tmp_path / "pool.json"
    pool_file.write_text(json.dumps({"pool": [
        {"unit": "MELBIS_AGENT_STORE", "command": "CmdAdd", "params": {"sku": "S-1", "name": SIG}},
        {"unit": "MELBIS_AGENT_STORE", "command": "CmdList", "into": "job"}]}), encoding="utf-8")
    with Journal(tmp_path / "state" / "journal.sqlite") as journal, \
            ToolRunClient(store.url, store.token) as client:
        answer = run_pool(load_pool(pool_file), client,
                          RunConfig(out=tmp_path / "out", redactor=Redactor([SIG])), journal=journal)
    assert [e["status"] for e in answer["steps"]] == ["completed", "completed"]
    rows = (tmp_path / "out" / "job.goods.jsonl").read_text().splitlines()
    assert [json.loads(r)["name"] for r in rows] == ["***"]
    for path in written(tmp_path):
        assert SIG.encode() not in path.read_bytes(), path
