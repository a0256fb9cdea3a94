"""The masking rule, through the real ``pooler`` command: text is masked before it is cut, secrets
that are numbers, short values and objects are masked, and masking leaves alone what does not hold
a secret as a whole word; ``secret: false`` is honoured.  See pooler/redact.py for the rule."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from helpers import Store, answer_of, pooler, send_answer, serve

TEST = "MELBIS_AGENT_TEST"
TOKEN = "tok-CUT-7a41c9e2b5d8f036"


def everything(tmp_path: Path, proc: subprocess.CompletedProcess[str]) -> str:
    """All that pooler printed and wrote: stdout, stderr, every file (the journal's rows as text)."""
    parts = [proc.stdout, proc.stderr]
    files = [p for folder in ("out", "state") for p in (tmp_path / folder).rglob("*") if p.is_file()]
    for path in [*files, tmp_path / "run.log"]:
        parts.append(path.read_bytes().decode("utf-8", "replace"))
    for journal in (tmp_path / "state").rglob("journal.sqlite"):
        with sqlite3.connect(journal) as db:
            for (text,) in db.execute("SELECT result FROM calls"):
                parts.append(str(text))
    return "\n".join(parts)


class CuttingStore(BaseHTTPRequestHandler):
    """A crash whose text holds the token across the 2,000-character cut (and, for a second kind of
    call, across the 16,000 bytes the client reads of a text, after spaces it strips)."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length))
        self.headers.replace_header("Content-Length", "0")
        if request["command"] == "CmdFar":
            text = " " * 14_500 + "y" * 1_490 + TOKEN + "z" * 4_000
        else:
            text = "x" * 1_990 + TOKEN + "z" * 500
        send_answer(self, 500, "text/plain", text.encode())

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""


def test_a_token_across_the_cut_of_a_text_leaves_no_part_of_itself(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text("stop_on_error: false\npool:\n  - {unit: SHOP, command: CmdCrash}\n"
                    "  - {unit: SHOP, command: CmdFar}\n", encoding="utf-8")
    journal = tmp_path / "state" / "journal.sqlite"
    with serve(CuttingStore) as url:
        proc = pooler("run", str(pool), "--store", url, "--token-file", str(tmp_path / "token"), "--json",
                      "--out", str(tmp_path / "out"), "--journal", str(journal),
                      "--log", str(tmp_path / "run.log"))
    assert proc.returncode == 1, proc.stderr
    crash, far = answer_of(proc)["steps"]
    assert crash["message"] == "x" * 1_990 + "***" + "z" * 7
    assert far["message"] == "y" * 1_490 + "***"
    show = pooler("show", answer_of(proc)["task"], "--journal", str(journal), "--json")
    seen = everything(tmp_path, proc) + show.stdout
    assert TOKEN[:6] not in seen


def echo_pool(tmp_path: Path, vars_: dict[str, Any], params: dict[str, Any], key: str | None = None) -> Path:
    step: dict[str, Any] = {"name": "e", "unit": TEST, "command": "CmdEcho", "params": params}
    if key:
        step["key"] = key
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"vars": vars_, "pool": [step]}), encoding="utf-8")
    return path


def run(store: Store, tmp_path: Path, pool: Path, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "state" / "journal.sqlite"), "--log", str(tmp_path / "run.log"),
                  env={"POOLER_TOKEN": store.token, **(env or {})})


def test_secrets_that_are_numbers_short_values_or_objects_are_masked(store: Store, tmp_path: Path) -> None:
    vars_ = {"pin": {"default": 987654321, "secret": True}, "code": {"default": "Q7", "secret": True},
             "login": {"default": {"user": "annika-x", "password": "hunter2-horse", "n": 7340077},
                       "secret": True}}
    params = {"pin": "${pin}", "said": "pin ${pin}, code ${code}", "code": "${code}", "login": "${login}",
              "text": "as json: ${login}"}
    proc = run(store, tmp_path, echo_pool(tmp_path, vars_, params))
    assert proc.returncode == 0, proc.stderr
    detail = answer_of(proc)["steps"][0]["detail"]
    assert detail == {"pin": "***", "said": "pin ***, code ***", "code": "***",
                      "login": {"user": "***", "password": "***", "n": "***"},
                      "text": 'as json: {"user": "***", "password": "***", "n": ***}'}
    # The store got the real values.
    assert store.ops()[-1]["params"]["login"] == vars_["login"]["default"]
    seen = everything(tmp_path, proc)
    for value in ("987654321", "hunter2-horse", "7340077", "Q7", "annika-x"):
        assert value not in seen
    # Too short to mask safely: said once, for each.
    warning = ("pooler: WARNING: the secret variable [code] is 2 characters long - it is masked as *** only "
               "where it stands as a whole word, and so is the same word anywhere in the store's data; a "
               "secret of 12 characters or more is masked wherever it appears.")
    assert proc.stderr.count(warning) == 1
    assert "the secret variable [login] is 7 characters long" in proc.stderr
    assert "the secret variable [pin] is 9 characters long" in proc.stderr


def test_masking_changes_only_what_holds_the_secret_as_a_whole_word(store: Store, tmp_path: Path) -> None:
    vars_ = {"word": {"default": "demo", "secret": True}, "cur": {"env": "SHOP_CUR", "secret": False},
             "sig": {"env": "SHOP_SIG"}}
    params = {"a": "demonstration", "b": "demo unit", "c": "${word}", "d": "xdemo_demo2", "e": "(demo)",
              "cur": "${cur}", "f": "pay in ${cur}", "g": "${sig}", "h": "signature: ${sig}."}
    pool = echo_pool(tmp_path, vars_, params, key="pay-${cur}")
    demo = tmp_path / "demo"
    demo.mkdir()
    pool = pool.rename(demo / "demo.json")
    proc = run(store, tmp_path, pool, env={"SHOP_CUR": "NOK", "SHOP_SIG": "S1GNATURE-0042"})
    assert proc.returncode == 0, proc.stderr
    step = answer_of(proc)["steps"][0]
    assert step["detail"] == {"a": "demonstration", "b": "*** unit", "c": "***", "d": "xdemo_demo2",
                              "e": "(***)", "cur": "NOK", "f": "pay in NOK", "g": "***",
                              "h": "signature: ***."}
    assert step["key"] == "pay-NOK"
    assert "the secret variable [word] is 4 characters long" in proc.stderr
    assert "[cur]" not in proc.stderr
    assert "S1GNATURE-0042" not in everything(tmp_path, proc)
    assert "NOK" in (tmp_path / "run.log").read_text(encoding="utf-8")
