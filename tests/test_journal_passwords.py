"""No PostgreSQL password in any message: every spelling of a journal URL libpq accepts (or nearly
accepts), in every place a journal URL or libpq's error text reaches a person or a document."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler
from test_mcp import connect, run

pytestmark = pytest.mark.postgres

PASSWORD = "Qx7v-Kp93mZ"
#: What must appear nowhere: the password, and the pieces libpq may quote of one split at an "@".
PIECES = ("Qx7v", "Kp93mZ")

#: Each spelling: the URL (for a fresh database ``{db}`` on ``{port}``), and what the messages say
#: went wrong, ``{shown}`` the URL as messages show it.
NO_JOURNAL = ("the database {shown} holds no pooler journal yet - create it with: pooler journal "
              "upgrade --journal {argument}")
SPELLINGS: dict[str, tuple[str, str, str]] = {
    "user info": ("postgresql://postgres:" + PASSWORD + "@127.0.0.1:{port}/{db}",
                  "postgresql://postgres:***@127.0.0.1:{port}/{db}", NO_JOURNAL),
    "?password= in the query": ("postgresql://postgres@127.0.0.1:{port}/{db}?password=" + PASSWORD,
                                "postgresql://postgres@127.0.0.1:{port}/{db}?password=***", NO_JOURNAL),
    "&password= in the query": (
        "postgresql://postgres@127.0.0.1:{port}/{db}?connect_timeout=5&password=" + PASSWORD,
        "postgresql://postgres@127.0.0.1:{port}/{db}?connect_timeout=5&password=***", NO_JOURNAL),
    "password= in a keyword DSN": (
        "host=127.0.0.1 port={port} dbname={db} user=postgres password=" + PASSWORD,
        "host=127.0.0.1 port={port} dbname={db} user=postgres password=***", NO_JOURNAL),
    "password='...' quoted in a keyword DSN": (
        "host=127.0.0.1 port={port} password='Qx7v Kp93mZ' dbname={db} user=postgres",
        "host=127.0.0.1 port={port} password=*** dbname={db} user=postgres", NO_JOURNAL),
    "a typo in the host": (
        "postgresql://postgres:" + PASSWORD + "@[127.0.0.1:{port}/{db}",
        "postgresql://postgres:***@[127.0.0.1:{port}/{db}",
        ('cannot reach the journal {shown}: end of string reached when looking for matching "]" in IPv6 '
        'host address in URI: "{shown}"')),
    "a bad % escape in the password": (
        "postgresql://postgres:" + PASSWORD + "%zz@127.0.0.1:{port}/{db}",
        "postgresql://postgres:***@127.0.0.1:{port}/{db}",
        'cannot reach the journal {shown}: invalid percent-encoded token: "***"'),
    "an unescaped @ in the password": (
        "postgresql://postgres:Qx7v@Kp93mZ@127.0.0.1:{port}/{db}",
        "postgresql://postgres:***@127.0.0.1:{port}/{db}",
        ("cannot reach the journal {shown}: failed to resolve host '***@127.0.0.1': [Errno -2] Name or "
        "service not known")),
}


class Spelled:
    """One spelling of the journal URL of a fresh database, and the message it must give."""

    def __init__(self, name: str, pg_url: str) -> None:
        rest = pg_url.split("@", 1)[1]
        port, db = rest.split(":", 1)[1].split("/", 1)
        url, shown, told = SPELLINGS[name]
        self.url = url.format(port=port, db=db)
        self.shown = shown.format(port=port, db=db)
        self.argument = f"'{self.shown}'" if " " in self.shown else self.shown
        self.told = told.format(shown=self.shown, argument=self.argument)
        self.db = db


def clean(text: str) -> None:
    for piece in (PASSWORD, *PIECES):
        assert piece not in text


def pool_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pool = folder / "pool.yaml"
    pool.write_text("pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 1}}\n")
    return pool


def run_args(store: Store, tmp_path: Path) -> list[str]:
    token = tmp_path / "token"
    token.write_text(store.token)
    token.chmod(0o600)
    return ["run", str(pool_file(tmp_path / "p")), "--store", store.url, "--token-file", str(token),
            "--out", str(tmp_path / "out"), "--task", "t-1"]


def on_stderr(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    proc = pooler(*run_args(store, tmp_path), "--journal", spelled.url)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"pooler: {spelled.told}"
    return proc.stdout + proc.stderr


def in_the_json_refusal(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    proc = pooler(*run_args(store, tmp_path), "--journal", spelled.url, "--json")
    assert proc.returncode == 2
    document = json.loads(proc.stdout)
    assert document["problems"][0]["message"] == spelled.told
    return proc.stdout + proc.stderr


def in_the_environment(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    proc = pooler(*run_args(store, tmp_path), "--json", env={"POOLER_JOURNAL": spelled.url})
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["problems"][0]["message"] == spelled.told
    return proc.stdout + proc.stderr


def in_runs(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    proc = pooler("runs", "--journal", spelled.url)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"pooler: {spelled.told}"
    listed = pooler("runs", "--journal", spelled.url, "--json")
    assert json.loads(listed.stdout)["problems"][0]["message"] == spelled.told
    return proc.stdout + proc.stderr + listed.stdout + listed.stderr


def in_show(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    proc = pooler("show", "t-1", "--journal", spelled.url)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"pooler: {spelled.told}"
    return proc.stdout + proc.stderr


def in_journal_upgrade(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    proc = pooler("journal", "upgrade", "--journal", spelled.url)
    if spelled.told == NO_JOURNAL.format(shown=spelled.shown, argument=spelled.argument):
        # A database libpq reaches: the journal is made, and the message names it.
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"created the journal {spelled.shown} (schema version ")
        again = pooler("show", "t-1", "--journal", spelled.url)
        assert again.stderr.splitlines()[0] == (f"pooler: no task t-1 in the journal {spelled.shown} - "
                                                "'pooler runs' lists the tasks it holds.")
        return proc.stdout + proc.stderr + again.stdout + again.stderr
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"pooler: {spelled.told}"
    return proc.stdout + proc.stderr


def in_the_junit_file(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    junit = tmp_path / "run.xml"
    proc = pooler(*run_args(store, tmp_path), "--journal", spelled.url, "--junit", str(junit))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"pooler: {spelled.told}"
    return proc.stdout + proc.stderr + (junit.read_text() if junit.exists() else "")


def in_the_mcp_server(spelled: Spelled, store: Store, tmp_path: Path) -> str:
    out = tmp_path / "out"
    out.mkdir()
    said: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect(store, out, "--journal", spelled.url) as session:
            result = await session.call_tool("tool_pool", {"pool": [
                {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}}]})
        said["result"] = result

    run(scenario)
    result = said["result"]
    assert result.is_error is True
    block = result.content[0]
    from mcp import types  # noqa: PLC0415

    assert isinstance(block, types.TextContent)
    assert spelled.told in block.text
    return block.text + json.dumps(result.structured_content) + (tmp_path / "mcp-stderr.log").read_text()


PLACES: dict[str, Callable[[Spelled, Store, Path], str]] = {
    "stderr of run": on_stderr,
    "the run --json refusal": in_the_json_refusal,
    "POOLER_JOURNAL": in_the_environment,
    "runs": in_runs,
    "show": in_show,
    "journal upgrade": in_journal_upgrade,
    "run --junit": in_the_junit_file,
    "the MCP server": in_the_mcp_server,
}


# The MCP server is met as a client meets it: a process of its own.
@pytest.mark.parametrize("place", [pytest.param(p, marks=pytest.mark.process) if p == "the MCP server" else p
                                   for p in PLACES])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_no_journal_password_reaches_a_message(spelling: str, place: str, store: Store, pg_url: str,
                                               tmp_path: Path) -> None:
    spelled = Spelled(spelling, pg_url)
    told = PLACES[place](spelled, store, tmp_path)
    clean(told)
    assert spelled.db in told
    assert "127.0.0.1" in told
