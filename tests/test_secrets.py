"""The token and secret variables never appear in anything pooler prints or writes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

from helpers import Store, answer_of, pooler

TOKEN = "tok-4711-never-shown-Zq"
SECRET = "sig-0815-never-shown-Xw"

POOL = """\
vars:
  signature: {env: SHOP_SIGNATURE, secret: true}
  label: {default: plain}
pool:
  - name: echo
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    key: echo-${signature}
    params: {signature: "${signature}", note: "signed with ${signature}", label: "${label}"}
  - name: cur
    unit: MELBIS_AGENT_CURRENCY
    command: CmdAdd
    params: {skey: SEC, name: "${signature}"}
  - name: list
    unit: MELBIS_AGENT_CURRENCY
    command: CmdList
    into: currencies
  - name: refused
    unit: MELBIS_AGENT_CURRENCY
    command: CmdUpdate
    params: {id: "${signature}"}
"""


def files_under(folder: Path) -> Iterator[Path]:
    return (p for p in folder.rglob("*") if p.is_file())


def assert_nowhere(texts: list[str], folders: list[Path]) -> None:
    for text in texts:
        assert TOKEN not in text
        assert SECRET not in text
    checked = 0
    for folder in folders:
        for path in files_under(folder):
            data = path.read_bytes()
            assert TOKEN.encode() not in data, path
            assert SECRET.encode() not in data, path
            checked += 1
    assert checked


def run(secret_store: Store, tmp_path: Path, token_file: Path,
        *extra: str) -> subprocess.CompletedProcess[str]:
    pool = tmp_path / "secret.yaml"
    pool.write_text(POOL)
    return pooler("run", str(pool), "--store", secret_store.url, "--token-file", str(token_file),
                  "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "state" / "journal.sqlite"),
                  "--log", str(tmp_path / "logs" / "run.log"), "--no-stop-on-error", *extra,
                  env={"SHOP_SIGNATURE": SECRET})


def test_a_run_masks_the_secret_everywhere(secret_store: Store, tmp_path: Path, token_file: Path) -> None:
    (tmp_path / "logs").mkdir()
    proc = run(secret_store, tmp_path, token_file, "--json")
    assert proc.returncode == 1, proc.stderr  # the last step is refused, on purpose
    answer = answer_of(proc)
    echo = answer["steps"][0]
    assert echo["status"] == "completed"
    assert echo["key"] == "echo-***"
    assert echo["detail"] == {"signature": "***", "note": "signed with ***", "label": "plain"}
    # The secret did reach the store: it is masked on the way back, not withheld on the way out.
    assert secret_store.ops()[0]["params"]["signature"] == SECRET
    assert (tmp_path / "out" / "currencies.currency.jsonl").is_file()
    assert_nowhere([proc.stdout, proc.stderr], [tmp_path / "out", tmp_path / "state", tmp_path / "logs"])


def test_runs_show_and_dry_run_keep_it_masked(secret_store: Store, tmp_path: Path, token_file: Path) -> None:
    (tmp_path / "logs").mkdir()
    task = answer_of(run(secret_store, tmp_path, token_file, "--json"))["task"]
    journal = str(tmp_path / "state" / "journal.sqlite")
    shown = [pooler("runs", "--journal", journal), pooler("show", task, "--journal", journal),
             pooler("show", task, "--journal", journal, "--json"),
             run(secret_store, tmp_path, token_file, "--dry-run"),
             run(secret_store, tmp_path, token_file, "--dry-run", "--json")]
    assert all(p.returncode == 0 for p in shown), [p.stderr for p in shown]
    assert "***" in shown[3].stdout
    assert_nowhere([p.stdout + p.stderr for p in shown], [tmp_path / "state"])


def test_a_wrong_token_is_not_shown_either(secret_store: Store, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong-token"
    wrong.write_text("tok-wrong-Zq-never-shown")
    proc = pooler("call", "MELBIS_AGENT_TEST", "CmdEcho", "--store", secret_store.url, "--token-file",
                  str(wrong), "--json")
    assert proc.returncode == 1
    assert answer_of(proc)["message"].startswith("ACCESS_DENIED")
    assert "tok-wrong-Zq-never-shown" not in proc.stdout + proc.stderr


def test_the_token_from_the_environment_is_masked_too(secret_store: Store, tmp_path: Path) -> None:
    proc = pooler("call", "MELBIS_AGENT_TEST", "CmdEcho", "--params", f'{{"echoed": "{TOKEN}"}}',
                  "--store", secret_store.url, "--json", "--out", str(tmp_path / "out"),
                  env={"POOLER_TOKEN": TOKEN})
    assert proc.returncode == 0, proc.stderr
    assert answer_of(proc)["detail"] == {"echoed": "***"}
    assert TOKEN not in proc.stdout + proc.stderr


def test_a_missing_token_file_is_named_and_nothing_is_sent(secret_store: Store, tmp_path: Path) -> None:
    proc = pooler("call", "MELBIS_AGENT_TEST", "CmdEcho", "--store", secret_store.url, "--token-file",
                  str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"pooler: no such token file: {tmp_path / 'nope'} - write the token into "
                                   "it, or give another with --token-file")
