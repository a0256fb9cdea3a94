"""A command starts with what it uses: ``pooler --version`` loads none of the commands, a run of a
JSON pool loads neither the YAML parser nor rich, the report, the MCP server or PostgreSQL's driver.

Told by the modules a process holds once the command has ended, not by a time: a module loaded for
nothing fails here however busy the machine is.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import Store, environment

from pooler.cli.main import main
from pooler.version import __version__

#: ``pooler ARGS`` through the command line's ``main`` in a fresh process, then the modules it holds.
PROBE = """
import json, sys
from pooler.cli.main import main
status = main(sys.argv[2:])
with open(sys.argv[1], "w", encoding="utf-8") as report:
    json.dump({"status": status, "modules": sorted(sys.modules)}, report)
"""

#: What no command below loads: the terminal's drawing, the HTML report and its templates, the MCP
#: server and its SDK, PostgreSQL's driver, the metrics file, the live view.
NEVER = ("rich", "jinja2", "markupsafe", "pooler.report.html", "pooler.report.metrics", "pooler.mcp", "mcp",
         "psycopg", "pooler.cli.live", "requests")
#: What a run that sends its calls does without: the dry run's and a plan file's pages.
NOT_FOR_A_RUN = ("pooler.cli.commands.dry_run", "pooler.cli.commands.plan_show")
#: What a run of a right JSON pool does without: the YAML parser reads YAML and tells where a
#: JSON problem stands, difflib suggests a name for a misspelt one, fractions reads a budget in
#: percent, and uuid would load platform for a random name.
NOT_FOR_JSON = ("yaml", "pooler.pool.positions", "pooler.pool.streamed", "difflib", "fractions", "uuid")
#: The HTTP client, for the commands that call a store.
HTTP = ("urllib3", "pooler.client.http")
#: The engine, which printing the version or the help needs none of.
ENGINE = (*HTTP, "sqlite3", "pooler.run", "pooler.journal", "pooler.client", "pooler.pool.loader")


def modules_after(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    status, modules, _ = told_after(tmp_path, *args, env=env)
    return status, modules


def told_after(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    """The exit status, the modules loaded and what was written (stdout, then stderr)."""
    report = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", PROBE, str(report), *args], capture_output=True, text=True,
                          env=environment(env), cwd=tmp_path, timeout=120, check=False)
    assert report.is_file(), done.stderr
    found = json.loads(report.read_text(encoding="utf-8"))
    return found["status"], found["modules"], done.stdout + done.stderr


def loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` (a package counts with its submodules) ``modules`` holds."""
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names))


def one_step_pool(tmp_path: Path) -> Path:
    pool = tmp_path / "one.json"
    pool.write_text(json.dumps({"pool": [{"name": "echo", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho",
                                          "params": {"i": 1}}]}), encoding="utf-8")
    return pool


@pytest.mark.process
@pytest.mark.parametrize("args", [["--version"], ["--help"]], ids=["version", "help"])
def test_the_version_and_the_help_load_no_command_and_no_engine(tmp_path: Path, args: list[str]) -> None:
    status, modules, said = told_after(tmp_path, *args)
    assert status == 0
    if args == ["--version"]:
        assert said == f"pooler {__version__}\n"
    else:
        assert said.startswith("usage: pooler [-h] [--version] COMMAND ...")
    commands = [m for m in modules if m.startswith("pooler.cli.commands.")]
    assert commands == ["pooler.cli.commands.common"]
    assert loaded(modules, NEVER + NOT_FOR_A_RUN + NOT_FOR_JSON + ENGINE) == []


@pytest.mark.process
def test_a_run_of_a_one_step_json_pool_loads_no_yaml_rich_report_mcp_or_postgres(
        store: Store, tmp_path: Path) -> None:
    status, modules = modules_after(tmp_path, "run", str(one_step_pool(tmp_path)), "--store", store.url,
                                    "--out", str(tmp_path / "out"), env={"POOLER_TOKEN": store.token})
    assert status == 0
    assert [op["command"] for op in store.ops()] == ["CmdEcho"]
    # The probe itself: the run did load the engine it needs.
    assert {"urllib3", "pooler.run.executor", "pooler.cli.commands.run"} <= set(modules)
    assert loaded(modules, NEVER + NOT_FOR_A_RUN + NOT_FOR_JSON) == []


@pytest.mark.process
def test_a_json_pool_that_fails_its_checks_still_says_where_with_the_yaml_parser_loaded_then(
        tmp_path: Path) -> None:
    pool = tmp_path / "bad.json"
    pool.write_text('{"pool": [\n  {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "parms": {}}\n]}\n',
                    encoding="utf-8")
    status, modules, said = told_after(tmp_path, "check", str(pool))
    assert status == 2
    assert said.splitlines()[:3] == [
        f"{pool}:2:55: Unknown key [parms] in step 1 - did you mean params?",
        '    2 |   {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "parms": {}}',
        "      |                                                       ^",
    ]
    assert "pooler.pool.positions" in modules
    assert loaded(modules, NEVER + HTTP) == []


@pytest.mark.process
def test_check_runs_and_show_load_no_rich_report_or_http_client(store: Store, tmp_path: Path) -> None:
    pool, journal, task = one_step_pool(tmp_path), str(tmp_path / "journal.sqlite"), "20261130-120001-3fa2c1"
    status, _ = modules_after(tmp_path, "run", str(pool), "--store", store.url, "--journal", journal,
                              "--task", task, "--out", "out", env={"POOLER_TOKEN": store.token})
    assert status == 0
    status, modules = modules_after(tmp_path, "check", str(pool))
    assert status == 0
    assert loaded(modules, NEVER + NOT_FOR_JSON + HTTP + ("pooler.run.executor",)) == []
    for args in (["runs"], ["runs", "--json"], ["show", task], ["show", task, "--json"]):
        status, modules, said = told_after(tmp_path, *args, "--journal", journal)
        assert status == 0
        assert task in said
        # A pipe gets lines and --json a document: rich draws a terminal's tables alone.
        assert loaded(modules, NEVER + HTTP) == [], args


#: ``pooler ARGS`` as the ``pooler`` script and ``python -m pooler`` run it, then what the garbage
#: collector did meanwhile.
COLLECTED = """
import gc, json, sys
from pooler.__main__ import run
collections = []
# A collection before the start-up's objects are frozen is one made while the command started.
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(gc.get_freeze_count() > 0))
report = sys.argv.pop(1)
status = run()
with open(report, "w", encoding="utf-8") as out:
    json.dump({"status": status, "while_starting": collections.count(False), "frozen": gc.get_freeze_count(),
               "enabled": gc.isenabled()}, out)
"""


@pytest.mark.process
def test_a_pooler_process_collects_no_garbage_while_it_starts_and_keeps_its_start_out_of_later_collections(
        tmp_path: Path) -> None:
    report = tmp_path / "gc.json"
    pool = one_step_pool(tmp_path)
    done = subprocess.run([sys.executable, "-c", COLLECTED, str(report), "check", str(pool)],
                          capture_output=True, text=True, env=environment(), cwd=tmp_path, timeout=120,
                          check=False)
    assert done.stdout == "1 file valid\n", done.stderr
    found = json.loads(report.read_text(encoding="utf-8"))
    assert found["status"] == 0
    assert found["while_starting"] == 0
    # The modules, classes and parser of the start: tens of thousands of objects no collection scans.
    assert found["frozen"] > 10_000
    # The command itself runs with the collector on: a long run's cycles are still freed.
    assert found["enabled"] is True


def test_main_called_with_a_command_line_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    frozen = gc.get_freeze_count()
    assert main(["check", str(one_step_pool(tmp_path))]) == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


#: What a check of a right pool without --junit or --against does without: a journal (the masking of
#: its passwords needs its URL's module alone), the XML writer, a temporary folder, and
#: importlib.resources, which would load zipfile for a schema file that is never in a zip.
NOT_FOR_A_CHECK = ("pooler.journal.api", "pooler.journal.records", "pooler.journal.opening",
                   "pooler.journal.work", "sqlite3", "xml", "pooler.report", "tempfile", "zipfile",
                   "importlib.resources", "secrets", "socket")


@pytest.mark.process
def test_a_check_of_a_right_pool_loads_no_journal_xml_writer_or_temporary_folder(tmp_path: Path) -> None:
    status, modules, said = told_after(tmp_path, "check", str(one_step_pool(tmp_path)))
    assert (status, said) == (0, "1 file valid\n")
    assert loaded(modules, NOT_FOR_A_CHECK) == []
    junit = tmp_path / "check.xml"
    status, modules, _ = told_after(tmp_path, "check", str(one_step_pool(tmp_path)), "--junit", str(junit))
    assert status == 0
    assert junit.read_text(encoding="utf-8").startswith('<?xml version="1.0" encoding="utf-8"?>\n<testsuites')
    assert "xml.etree.ElementTree" in modules


@pytest.mark.process
def test_tools_and_call_under_json_load_no_rich(store: Store, tmp_path: Path) -> None:
    echo = ["call", "MELBIS_AGENT_TEST", "CmdEcho", "--params", '{"i": 1}']
    for args in (["tools", "MELBIS_AGENT_TEST"], echo):
        status, modules, said = told_after(tmp_path, *args, "--store", store.url, "--json",
                                           env={"POOLER_TOKEN": store.token})
        assert status == 0, said
        assert '"result": true' in said
        assert loaded(modules, NEVER + NOT_FOR_A_RUN) == [], args
