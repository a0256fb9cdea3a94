"""Output a cron job and an alert can rely on, through the real command against the real store.

``--json`` is one document in every outcome; refusals come before anything is sent (a wrong config
key, no token, an ``--out`` that cannot be written, an empty feed); small things say what they do.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, answer_of, pooler

POOL = "pool:\n  - {name: echo, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 1}}\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run(store: Store, tmp_path: Path, pool: Path, *extra: str,
        env: dict[str, str] | None = None) -> Any:
    return pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token} if env is None else env)


def one_document(proc: Any) -> dict[str, Any]:
    """stdout holds exactly one JSON document, and nothing else."""
    document, end = json.JSONDecoder().raw_decode(proc.stdout)
    assert proc.stdout[end:].strip() == ""
    assert isinstance(document, dict)
    return document


@pytest.mark.parametrize("argv", [
    ["call", "MELBIS_AGENT_TEST", "CmdEcho"],
    ["tools"],
    ["tools", "MELBIS_AGENT_TEST"],
])
def test_a_store_that_is_down_is_a_document_and_exit_1(tmp_path: Path, argv: list[str]) -> None:
    proc = pooler(*argv, "--store", "http://127.0.0.1:9", "--json", "--out", str(tmp_path / "out"),
                  env={"POOLER_TOKEN": "t"}) if argv[0] == "call" else \
        pooler(*argv, "--store", "http://127.0.0.1:9", "--json", env={"POOLER_TOKEN": "t"})
    assert proc.returncode == 1, proc.stderr
    document = one_document(proc)
    assert {k: document[k] for k in ("result", "status", "exit")} == {"result": False, "status": "failed",
                                                                       "exit": 1}
    assert document["exit_meaning"] == "a step or call failed, or the store could not be reached"
    assert "http://127.0.0.1:9" in document["message"]


def test_a_bad_flag_is_a_document_too(tmp_path: Path) -> None:
    proc = pooler("run", "pools/demo.yaml", "--json", "--mode", "sideways")
    assert proc.returncode == 2
    assert one_document(proc)["status"] == "refused"
    assert "invalid choice: 'sideways'" in proc.stderr


def test_a_misspelt_config_key_is_refused_where_it_stands(store: Store, tmp_path: Path) -> None:
    token = write(tmp_path, "shop.token", store.token + "\n")
    token.chmod(0o600)
    config = write(tmp_path, "stores.yaml",
                   f"stores:\n  shop:\n    url: {store.url}\n    tokn_file: shop.token\n")
    proc = pooler("run", str(write(tmp_path, "p.yaml", POOL)), "--store", "shop", "--config", str(config),
                  "--journal", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "out"), "--json")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (f"{config}:4:5: unknown key 'tokn_file' in the store 'shop' - did "
                                           "you mean token_file?")
    assert one_document(proc)["problems"][0] | {"message": ""} == {
        "message": "", "file": str(config), "line": 4, "column": 5, "step": None, "path": None}
    top = write(tmp_path, "top.yaml", f"store:\n  shop: {{url: {store.url}}}\n")
    other = pooler("tools", "--store", "shop", "--config", str(top))
    assert other.stderr.startswith(f"{top}:1:1: unknown key 'store' at the top of the config file - did you "
                                   "mean stores?")
    assert store.ops() == []


def test_a_run_with_no_token_is_refused_before_sending(store: Store, tmp_path: Path) -> None:
    proc = run(store, tmp_path, write(tmp_path, "p.yaml", POOL), "--json", env={})
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith(f"pooler: no token for the store {store.url}: give "
                                                  "--token-file PATH")
    assert one_document(proc)["status"] == "refused"
    assert store.ops() == []


def test_a_token_file_others_can_read_is_warned_of(store: Store, tmp_path: Path) -> None:
    token = write(tmp_path, "shop.token", store.token + "\n")
    token.chmod(0o644)
    proc = run(store, tmp_path, write(tmp_path, "p.yaml", POOL), "--token-file", str(token), env={})
    assert proc.returncode == 0, proc.stderr
    assert (f"pooler: WARNING: the token file {token} can be read by others (mode 644) - chmod 600 "
            f"{token}\n") in proc.stderr
    token.chmod(0o600)
    quiet = run(store, tmp_path, write(tmp_path, "p.yaml", POOL), "--token-file", str(token), env={})
    assert "WARNING" not in quiet.stderr


def test_out_under_a_regular_file_is_refused_before_the_first_call(store: Store, tmp_path: Path) -> None:
    blocker = write(tmp_path, "out", "I am a file\n")
    pool = write(tmp_path, "p.yaml",
                 "pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdTable, params: {rows: 2}}\n")
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(blocker / "run1"), "--journal",
                  str(tmp_path / "j.sqlite"), "--json", env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (f"pooler: --out {blocker / 'run1'}: {blocker} is a file, not a "
                                           "folder - give --out a folder (it is made if missing)")
    assert one_document(proc)["status"] == "refused"
    assert store.ops() == []
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # root writes anywhere: nothing to show there
        return
    denied = pooler("run", str(pool), "--store", store.url, "--out", str(locked / "out"), "--journal",
                    str(tmp_path / "j.sqlite"), env={"POOLER_TOKEN": store.token})
    assert denied.returncode == 2
    assert store.ops() == []


def test_an_empty_feed_fails_unless_the_step_allows_it(store: Store, tmp_path: Path) -> None:
    write(tmp_path, "goods.csv", "sku,name\n")
    step = ("  - name: add\n    unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"
            "    for_each: {file: goods.csv%s}\n    params: {sku: \"${row.sku}\"}\n")
    strict = write(tmp_path, "strict.yaml", "pool:\n" + step % "")
    proc = run(store, tmp_path, strict, "--json")
    assert proc.returncode == 2
    assert one_document(proc)["problems"][0]["message"] == (
        f"for_each of step 1 has no rows: the file {tmp_path / 'goods.csv'} is empty - a run over no rows "
        "would pass for a completed import. Write allow_empty: true under for_each if an empty source is "
        "fine.")
    assert re.match(rf"{re.escape(str(strict))}:5:\d+: ", proc.stderr)
    relaxed = write(tmp_path, "relaxed.yaml", "pool:\n" + step % ", allow_empty: true")
    fine = run(store, tmp_path, relaxed, "--json")
    assert fine.returncode == 0, fine.stderr
    assert answer_of(fine)["steps"][0]["status"] == "completed"
    # An earlier step's table that comes back empty fails the step at run time.
    from_table = write(tmp_path, "table.yaml", """\
pool:
  - {name: t, unit: MELBIS_AGENT_TEST, command: CmdTable, params: {rows: 0}}
  - name: each
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {step: t, table: rows}
    params: {r: "${row.n}"}
""")
    failed = run(store, tmp_path, from_table, "--json")
    assert failed.returncode == 1
    step = answer_of(failed)["steps"][1]
    assert step["status"] == "failed"
    assert "for_each of step 2 has no rows: the table of step t is empty" in step["failures"][0]["message"]
    assert [op["command"] for op in store.ops()] == ["CmdTable"]
