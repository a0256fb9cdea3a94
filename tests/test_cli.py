"""The command line as a whole: help, exit statuses, errors, named stores, tools, runs and show."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, pooler

from pooler.cli.commands import tools as tools_command
from pooler.cli.config import Target, resolve_target
from pooler.cli.main import NO_COMMAND, ExitStatus, build_parser, exit_status_for, main
from pooler.errors import (
    CheckFailed,
    InputError,
    JournalError,
    LockedError,
    Problem,
    StoreError,
    UsageError,
)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_exit_statuses_are_pinned() -> None:
    assert {s.name: int(s) for s in ExitStatus} == {
        "OK": 0, "FAILED": 1, "REFUSED": 2, "LOCKED": 3, "INTERNAL": 70, "INTERRUPTED": 130,
        "TERMINATED": 143}


def test_every_command_is_listed_and_has_a_description() -> None:
    found = subcommands()
    assert set(found) == {"run", "redrive", "plan", "apply", "check", "call", "tools", "runs", "show",
                          "journal", "gather", "store", "mcp", "lsp"}
    for name, sub in found.items():
        assert sub.description, name
        assert len(sub.description) > 30, name
    top = pooler("--help")
    assert top.returncode == 0
    for name in found:
        assert re.search(rf"^\s+{name}\s+\S", top.stdout, re.M), name


@pytest.mark.parametrize("name", ["run", "check", "call", "tools", "runs", "show"])
def test_every_command_has_help(name: str) -> None:
    proc = pooler(name, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"usage: pooler {name} ")
    first_words = " ".join((subcommands()[name].description or "").split()[:4])
    assert first_words in " ".join(proc.stdout.split())
    assert "--traceback" in proc.stdout


def test_the_store_mcp_and_lsp_commands_have_help_too() -> None:
    proc = pooler("store", "serve", "--help")
    assert proc.returncode == 0
    assert "--latency-ms" in proc.stdout
    assert pooler("store", "--help").returncode == 0
    served = pooler("mcp", "--help")
    assert served.returncode == 0
    assert served.stdout.startswith("usage: pooler mcp ")
    assert "Serve tool_list, tool_run and tool_pool" in served.stdout
    editor = pooler("lsp", "--help")
    assert editor.returncode == 0
    assert editor.stdout.startswith("usage: pooler lsp ")
    assert "--against STORE|DIR|FILE" in editor.stdout


def test_run_help_lists_every_pinned_option() -> None:
    text = pooler("run", "--help").stdout
    for flag in ("--store", "--token-file", "--out", "--json", "--var", "--vars-file", "--task", "--resume",
                 "--journal", "--dry-run", "--in-doubt", "--sample", "--mode", "--max-concurrency",
                 "--serialize-on", "--stop-on-error", "--no-stop-on-error", "--include-results",
                 "--no-include-results", "--quiet", "--log", "--insecure", "--timeout", "--traceback"):
        assert re.search(rf"(^|[\s,\[]){re.escape(flag)}([\s,=\]]|$)", text, re.M), flag


def test_a_bad_flag_exits_2() -> None:
    proc = pooler("run", str(ROOT / "pools" / "demo.yaml"), "--mode", "sideways")
    assert proc.returncode == 2
    assert "invalid choice: 'sideways'" in proc.stderr
    assert pooler("frobnicate").returncode == 2


@pytest.mark.parametrize("argv", [["--help"], ["frobnicate"], ["rnu", "pool.yaml"], []],
                         ids=["help", "misspelt", "near-miss", "none"])
def test_a_command_line_that_names_no_command_reads_the_same_with_no_command_loaded(argv: list[str]) -> None:
    """``pooler --help`` and a refused command name are told by the parser without the commands'
    modules: word for word what the whole parser (docs/cli.md's) tells."""
    said = []
    for parser in (build_parser(), build_parser(NO_COMMAND)):
        out, err = io.StringIO(), io.StringIO()
        with pytest.raises(SystemExit) as ended, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            parser.parse_args(argv)
        said.append((ended.value.code, out.getvalue(), err.getvalue()))
    assert said[0] == said[1]
    assert said[1][0] == (0 if argv == ["--help"] else 2)
    assert (said[1][1] + said[1][2]).startswith("usage: pooler [-h] [--version] COMMAND ...")


def test_each_error_maps_to_one_status() -> None:
    assert exit_status_for(UsageError("x")) == ExitStatus.REFUSED
    assert exit_status_for(InputError("x")) == ExitStatus.REFUSED
    assert exit_status_for(CheckFailed([Problem("x")])) == ExitStatus.REFUSED
    assert exit_status_for(JournalError("x")) == ExitStatus.REFUSED
    assert exit_status_for(StoreError("x", store="s", sent=False)) == ExitStatus.FAILED
    assert exit_status_for(LockedError("x")) == ExitStatus.LOCKED


def boom(args: argparse.Namespace, ctx: Any) -> int:
    raise ZeroDivisionError("division by zero in a handler")


def test_an_internal_error_is_exit_70_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_command, "handle", boom)
    out, err = io.StringIO(), io.StringIO()
    assert main(["tools", "--store", "http://127.0.0.1:9"], stdout=out, stderr=err, environ={}) == 70
    assert err.getvalue() == ("pooler: internal error: ZeroDivisionError: division by zero in a handler "
                              "(run with --traceback to see where)\n")
    err = io.StringIO()
    assert main(["tools", "--store", "http://127.0.0.1:9", "--traceback"], stdout=out, stderr=err,
                environ={}) == 70
    assert err.getvalue().startswith("Traceback (most recent call last):")
    assert 'in boom\n    raise ZeroDivisionError("division by zero in a handler")' in err.getvalue()
    assert out.getvalue() == ""


def test_a_pooler_error_never_shows_a_traceback(tmp_path: Path) -> None:
    proc = pooler("run", str(tmp_path / "nope.yaml"), "--traceback")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "nope.yaml" in proc.stderr


def write_config(tmp_path: Path, store: Store) -> Path:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "local.token").write_text(store.token + "\n")
    (tmp_path / "secrets" / "local.token").chmod(0o600)
    config = tmp_path / "stores.yaml"
    config.write_text(f"stores:\n  local: {{url: '{store.url}', token_file: secrets/local.token}}\n"
                      "  prod: {url: 'https://shop.example.com/mcp'}\n")
    return config


def test_a_named_store_from_the_config_file(store_factory: Any, tmp_path: Path) -> None:
    store: Store = store_factory("--token", "config-token-123")
    config = write_config(tmp_path, store)
    by_flag = pooler("tools", "MELBIS_AGENT_ORDER", "--store", "local", "--config", str(config), "--json")
    assert by_flag.returncode == 0, by_flag.stderr
    assert [t["unit"] for t in answer_of(by_flag)["tools"]] == ["MELBIS_AGENT_ORDER"]
    by_env = pooler("tools", "--json", env={"POOLER_STORE": "local", "POOLER_CONFIG": str(config)})
    assert by_env.returncode == 0, by_env.stderr
    assert "config-token-123" not in by_env.stdout + by_env.stderr


def test_an_unknown_store_name_says_what_is_known(tmp_path: Path, store: Store) -> None:
    config = write_config(tmp_path, store)
    proc = pooler("tools", "--store", "lcoal", "--config", str(config))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"pooler: no store named 'lcoal' in {config} (known: local, prod) - did "
                                   "you mean local? - give a URL like http://127.0.0.1:8080 or add the store "
                                   "under 'stores:' there")


def test_a_broken_config_file_is_pointed_at(tmp_path: Path) -> None:
    config = tmp_path / "stores.yaml"
    config.write_text("stores:\n  prod: {url: [\n")
    proc = pooler("tools", "--store", "prod", "--config", str(config))
    assert proc.returncode == 2
    assert re.match(rf"^{re.escape(str(config))}:\d+:\d+: the config file {re.escape(str(config))} is not "
                    "valid YAML", proc.stderr)


def test_target_precedence(tmp_path: Path) -> None:
    (tmp_path / "a.token").write_text("from-file")
    (tmp_path / "a.token").chmod(0o600)
    config = tmp_path / "c.yaml"
    config.write_text("stores:\n  s: {url: 'http://s.example/', token_file: a.token}\n")
    env = {"POOLER_CONFIG": str(config), "POOLER_TOKEN": "from-env", "POOLER_STORE": "http://env.example"}
    assert resolve_target(None, None, None, env) == Target("http://env.example", "from-env")
    assert resolve_target("s", None, None, env) == Target("http://s.example", "from-file", "s")
    (tmp_path / "b.token").write_text("  from-flag  \n")
    (tmp_path / "b.token").chmod(0o600)
    assert resolve_target("s", str(tmp_path / "b.token"), None, env).token == "from-flag"
    assert "from-file" not in repr(resolve_target("s", None, None, env))


def test_tools_as_a_table_and_as_json(store: Store) -> None:
    table = pooler("tools", "MELBIS_AGENT_CURRENCY", "--store", store.url, env={"POOLER_TOKEN": store.token})
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if " CmdAdd " in line)
    assert re.search(r"MELBIS_AGENT_CURRENCY\s+│\s+CmdAdd\s+│\s+yes\s+│\s+skey:str name:str\* "
                     r"multiplex:float=1 division:bool=false pos:int", row), table.stdout
    every = answer_of(pooler("tools", "--store", store.url, "--json", env={"POOLER_TOKEN": store.token}))
    assert every["result"] is True
    units = {t["unit"] for t in every["tools"]}
    assert {"MELBIS_AGENT_CURRENCY", "MELBIS_AGENT_STORE", "MELBIS_AGENT_IMPORT_GOODS",
            "MELBIS_AGENT_IMPORT_FILES", "MELBIS_AGENT_ORDER", "MELBIS_AGENT_TEST"} <= units


def test_tools_exits_1_when_the_store_refuses_or_is_away(store: Store) -> None:
    refused = pooler("tools", "--store", store.url, env={"POOLER_TOKEN": "not-the-token"})
    assert refused.returncode == 1
    assert refused.stderr.startswith("pooler tools: the store refused: ACCESS_DENIED")
    away = pooler("tools", "--store", "http://127.0.0.1:9")
    assert away.returncode == 1
    assert "cannot reach the store at http://127.0.0.1:9/" in away.stderr


def test_runs_and_show(store: Store, tmp_path: Path) -> None:
    journal = str(tmp_path / "journal.sqlite")
    empty = pooler("runs", "--journal", journal)
    assert empty.returncode == 2
    assert empty.stderr.strip() == (f"pooler: no journal at {journal} - nothing has run with it yet; give "
                                    "the one 'pooler run --journal' wrote with --journal.")
    tasks = []
    for name in ("currency.json", "demo.yaml"):
        proc = pooler("run", str(ROOT / "pools" / name), "--store", store.url, "--json", "--journal", journal,
                      "--out", str(tmp_path / "out"), env={"POOLER_TOKEN": store.token})
        tasks.append(answer_of(proc)["task"])
    listed = pooler("runs", "--journal", journal)
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == tasks[::-1]  # newest first
    # Counted against the task's plan.
    assert re.fullmatch(r"\S+  completed  started \S+  runs 1  2 calls planned: 2 completed  "
                        rf"{re.escape(str(ROOT / 'pools' / 'currency.json'))}", lines[1])
    as_json = answer_of(pooler("runs", "--journal", journal, "--json"))
    assert [t["id"] for t in as_json["tasks"]] == tasks[::-1]
    shown = pooler("show", tasks[0], "--journal", journal)
    assert shown.returncode == 0
    assert "1. cur MELBIS_AGENT_CURRENCY.CmdAdd completed" in shown.stdout
    assert shown.stdout.rstrip().splitlines()[-2].startswith("pool completed: 2 calls: 2 succeeded")
    assert shown.stdout.rstrip().splitlines()[-1] == "the task's plan: 2 calls planned: 2 completed"
    recorded = answer_of(pooler("show", tasks[0], "--journal", journal, "--json"))
    assert recorded["task"] == tasks[0]
    assert [s["name"] for s in recorded["steps"]] == ["cur", ""]
    missing = pooler("show", "no-such-task", "--journal", journal)
    assert missing.returncode == 2
    assert missing.stderr.strip() == (f"pooler: no task no-such-task in the journal {journal} - "
                                      "'pooler runs' lists the tasks it holds.")


def test_json_output_of_every_command_is_one_document(store: Store, tmp_path: Path) -> None:
    env = {"POOLER_TOKEN": store.token}
    journal = str(tmp_path / "j.sqlite")
    outputs = [
        pooler("run", str(ROOT / "pools" / "currency.json"), "--store", store.url, "--json", "--journal",
               journal, "--out", str(tmp_path / "out"), env=env),
        pooler("check", str(ROOT / "pools" / "demo.yaml"), "--json"),
        pooler("call", "MELBIS_AGENT_TEST", "CmdEcho", "--store", store.url, "--json", "--out",
               str(tmp_path / "out"), env=env),
        pooler("tools", "--store", store.url, "--json", env=env),
        pooler("runs", "--journal", journal, "--json"),
    ]
    for proc in outputs:
        assert proc.returncode == 0, proc.stderr
        decoder = json.JSONDecoder()
        _, end = decoder.raw_decode(proc.stdout)
        assert proc.stdout[end:].strip() == ""


def test_main_reads_sys_argv_when_given_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["pooler", "tools", "--store", "http://127.0.0.1:9"])
    err = io.StringIO()
    assert main(stdout=io.StringIO(), stderr=err, environ={}) == 1
    assert "cannot reach the store" in err.getvalue()
