"""``pooler lsp`` driven as an editor drives it: a process spoken to over stdio in JSON-RPC.

The diagnostics of every broken pool are ``pooler check --json``'s problems, text and place; the
completion, hover and definition answers come from the pool itself and from the reference store's
declarations (a store on a thread, ``--against`` its URL).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import ROOT, Store, environment, pooler, start_store
from lspkit import Client, uri_of

pytestmark = pytest.mark.process

POOLS = ROOT / "tests" / "pools"
#: Files whose bytes are not utf-8: an editor holds other text than the file, so check's words on
#: the bytes are not the server's on the buffer.
NOT_TEXT = {"bad-not-utf8.yaml"}
BROKEN = sorted(p.name for p in POOLS.glob("bad-*") if p.name not in NOT_TEXT)


def place(problem: dict[str, Any]) -> tuple[str, int, int]:
    """A problem of ``check --json`` as the server places it: 0-based, the file's start when the
    problem has no line, the line's start when it has no column."""
    line = problem["line"] - 1 if problem["line"] else 0
    return problem["message"], line, (problem["column"] - 1 if problem["column"] else 0)


def placed(diagnostic: dict[str, Any]) -> tuple[str, int, int]:
    start = diagnostic["range"]["start"]
    return diagnostic["message"], start["line"], start["character"]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = start_store(tmp_path_factory.mktemp("shop"))
    yield store
    store.stop()


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory, shop: Store) -> Path:
    path = tmp_path_factory.mktemp("token") / "shop.token"
    path.write_text(shop.token, encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture
def server() -> Iterator[Client]:
    client = Client()
    yield client
    assert client.close() == 0


@pytest.fixture
def against(shop: Store, token_file: Path) -> Iterator[Client]:
    client = Client("--against", shop.url, "--token-file", str(token_file))
    yield client
    assert client.close() == 0


def test_every_broken_pool_gets_exactly_checks_problems_at_their_places(server: Client) -> None:
    proc = pooler("check", "--json", *(f"tests/pools/{name}" for name in BROKEN))
    assert proc.returncode == 2
    files = {f["file"]: f["problems"] for f in json.loads(proc.stdout)["files"]}
    for name in BROKEN:
        pool = POOLS / name
        problems = files[f"tests/pools/{name}"]
        mark = server.mark()
        uri = server.open(pool)
        own = [d for d in server.diagnostics(uri, after=mark) if "relatedInformation" not in d]
        assert [placed(d) for d in own] == [place(p) for p in problems
                                            if p["file"] in (None, f"tests/pools/{name}")], name
        assert all(d["severity"] == 1 for d in own), name
        for other in {p["file"] for p in problems} - {None, f"tests/pools/{name}"}:
            told = server.diagnostics(uri_of(ROOT / other), after=mark)
            assert [placed(d) for d in told] == [place(p) for p in problems if p["file"] == other], name


def test_a_problem_covers_its_key_or_value_and_its_guess_is_a_quick_fix(server: Client) -> None:
    uri = server.open(POOLS / "bad-schema-and-meaning.yaml")
    found = {d["message"].split(" - ")[0]: d["range"] for d in server.diagnostics(uri)}
    # mode: paralel - the value; sekret - the key; "${shopp}" - the template inside its string.
    assert found["Unknown mode [paralel]"] == {"start": {"line": 1, "character": 6},
                                               "end": {"line": 1, "character": 13}}
    assert found["Unknown key [sekret] in variable shop"]["end"] == {"line": 3, "character": 30}
    assert found["${shopp} in params.name of step 2 names no variable"] == {
        "start": {"line": 12, "character": 35}, "end": {"line": 12, "character": 43}}
    actions = server.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "context": {"diagnostics": []},
        "range": {"start": {"line": 12, "character": 0}, "end": {"line": 12, "character": 44}}})
    assert [(a["title"], a["edit"]["changes"][uri]) for a in actions] == [
        ("Change shopp to shop", [{"range": {"start": {"line": 12, "character": 37},
                                             "end": {"line": 12, "character": 42}}, "newText": "shop"}])]


def test_a_file_changed_in_the_editor_is_checked_again(server: Client, tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    text = "pool:\n  - name: cur\n    unit: U\n    command: C\n    params: {a: \"@curr.id\"}\n"
    pool.write_text(text, encoding="utf-8")
    uri = server.open(pool)
    assert [d["message"].split(" - ")[0] for d in server.diagnostics(uri)] == ["@curr.id names no step"]
    mark = server.mark()
    server.change(uri, text.replace("@curr.id", "@cur.id"))
    assert [d["message"] for d in server.diagnostics(uri, after=mark)] == [
        ("@cur.id refers to its own step - a step's detail exists only after it ran; refer to an earlier "
         "step.")]
    mark = server.mark()
    server.change(uri, "pool:\n  - name: cur\n    unit: U\n    command: C\n    params: {a: b}\n")
    assert server.diagnostics(uri, after=mark) == []


def test_a_half_typed_file_gets_its_parse_error_and_the_server_goes_on(tmp_path: Path) -> None:
    # The command as an editor starts it: its process lives on, and ends 0 on shutdown and exit.
    server = Client(process=True)
    try:
        half_typed(server, tmp_path)
    finally:
        assert server.close() == 0


def half_typed(server: Client, tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - name: cur\n", encoding="utf-8")
    uri = server.open(pool, "pool:\n  - name: cur\n    unit: [MELBIS\n    command:")
    (found,) = server.diagnostics(uri)
    assert found["message"].startswith("not valid YAML: ")
    assert found["range"]["start"]["line"] == 3
    hover = server.request("textDocument/hover", server.at(uri, 1, 10))
    assert hover is None or "contents" in hover
    assert server.alive()


def test_completion_after_unit_lists_the_stores_units(against: Client, shop: Store,
                                                      tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - name: cur\n    unit: \n", encoding="utf-8")
    uri = against.open(pool)
    against.diagnostics(uri)
    items = against.request("textDocument/completion", against.at(uri, 2, 10))["items"]
    listed = requests.post(f"{shop.url}/tool_list", json={}, timeout=30,
                           headers={"Authorization": f"Bearer {shop.token}"}).json()["data"]["tools"]
    assert sorted(i["label"] for i in items) == sorted(t["unit"] for t in listed)
    assert "MELBIS_AGENT_CURRENCY" in [i["label"] for i in items]


def test_completion_of_a_command_and_its_fields_comes_from_the_declarations(against: Client,
                                                                            tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - name: cur\n    unit: MELBIS_AGENT_CURRENCY\n    command: CmdAdd\n"
                    "    params:\n      \n", encoding="utf-8")
    uri = against.open(pool)
    against.diagnostics(uri)
    commands = against.request("textDocument/completion", against.at(uri, 3, 13))["items"]
    assert {"CmdAdd", "CmdList", "CmdUpdate"} <= {i["label"] for i in commands}
    fields = {i["label"]: i["detail"] for i in against.request("textDocument/completion",
                                                                against.at(uri, 5, 6))["items"]}
    assert fields == {"skey": "str, optional", "name": "str, required", "multiplex": "float, optional",
                      "division": "bool, optional", "pos": "int, optional"}


def test_completion_after_an_at_lists_the_earlier_steps(server: Client, tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    text = ("pool:\n  - name: cur\n    unit: U\n    command: C\n  - name: kettle\n    unit: U\n"
            "    command: C\n    params: {a: \"@\"}\n  - name: last\n    unit: U\n    command: C\n")
    pool.write_text(text, encoding="utf-8")
    uri = server.open(pool)
    server.diagnostics(uri)
    items = server.request("textDocument/completion", server.at(uri, 7, 18))["items"]
    assert [(i["label"], i["detail"]) for i in items] == [("cur", "step 1: U.C")]


def test_hover_on_a_field_shows_its_declared_type(against: Client, tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - name: cur\n    unit: MELBIS_AGENT_CURRENCY\n    command: CmdAdd\n"
                    "    params:\n      skey: EUR\n      multiplex: 44.2\n", encoding="utf-8")
    uri = against.open(pool)
    against.diagnostics(uri)
    hover = against.request("textDocument/hover", against.at(uri, 6, 8))
    assert hover["contents"]["value"].startswith(
        "**field of MELBIS_AGENT_CURRENCY.CmdAdd**\n\nmultiplex (float, optional, default 1)")
    unit = against.request("textDocument/hover", against.at(uri, 2, 14))["contents"]["value"]
    assert unit.startswith("**MELBIS_AGENT_CURRENCY**: ")
    assert "commands: CmdList, CmdAdd, CmdUpdate" in unit
    command = against.request("textDocument/hover", against.at(uri, 3, 15))["contents"]["value"]
    assert command.startswith("**MELBIS_AGENT_CURRENCY.CmdAdd**: Adds a currency")
    assert "- name (str, required)" in command


def test_definition_of_a_reference_lands_on_its_steps_name(server: Client, tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - unit: U\n    command: C\n  - name: cur\n    unit: U\n    command: C\n"
                    "  - unit: U\n    command: C\n    params: {id: \"@cur.id\"}\n", encoding="utf-8")
    uri = server.open(pool)
    server.diagnostics(uri)
    found = server.request("textDocument/definition", server.at(uri, 8, 21))
    assert found == {"uri": uri, "range": {"start": {"line": 3, "character": 10},
                                           "end": {"line": 3, "character": 13}}}


def test_definition_of_a_pool_source_is_its_file(server: Client, tmp_path: Path) -> None:
    (tmp_path / "steps.json").write_text('[{"name": "cur", "unit": "U", "command": "C"}]', encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool_source: steps.json\n", encoding="utf-8")
    uri = server.open(pool)
    server.diagnostics(uri)
    found = server.request("textDocument/definition", server.at(uri, 0, 16))
    assert found["uri"] == uri_of(tmp_path / "steps.json")


def test_a_registry_named_in_the_file_is_what_its_steps_are_checked_against(server: Client,
                                                                            tmp_path: Path) -> None:
    saved = tmp_path / "shop-tools.json"
    saved.write_text(json.dumps({"result": True, "tools": [json.loads(
        (ROOT / "pooler" / "store" / "tools" / "melbis_agent_currency.json").read_text(encoding="utf-8"))]}),
        encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text("# pooler: against=shop-tools.json\npool:\n  - unit: MELBIS_AGENT_CURRENCY\n"
                    "    command: CmdAd\n", encoding="utf-8")
    uri = server.open(pool)
    (found,) = server.diagnostics(uri)
    assert found["message"].startswith(
        "Unknown command [CmdAd] of MELBIS_AGENT_CURRENCY - did you mean CmdAdd?")


def neovim() -> str:
    """Neovim's path; a test that needs it skips where it is missing, unless POOLER_REQUIRE_NEOVIM=1."""
    found = shutil.which("nvim")
    if found is None:
        if os.environ.get("POOLER_REQUIRE_NEOVIM") == "1":
            pytest.fail("nvim is not installed, and POOLER_REQUIRE_NEOVIM=1 asks for the Neovim test")
        pytest.skip("Neovim (nvim) is not installed: the real editor's test is skipped")
    return found


def test_neovim_shows_checks_problems_from_pooler_lsp(tmp_path: Path) -> None:
    nvim = neovim()
    name = "bad-schema-and-meaning.yaml"
    out = tmp_path / "diagnostics.json"
    env = environment({"POOLER_NVIM_OUT": str(out), "POOLER_NVIM_POOL": f"tests/pools/{name}",
                       "POOLER_NVIM_PYTHON": sys.executable, "HOME": str(tmp_path),
                       "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path / "state"),
                       "XDG_DATA_HOME": str(tmp_path / "data")})
    subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n",
                    "-c", f"luafile {ROOT / 'tests' / 'editors' / 'nvim_diagnostics.lua'}"],
                   cwd=ROOT, env=env, timeout=300, check=True, capture_output=True)
    shown = json.loads(out.read_text(encoding="utf-8"))
    assert shown["ok"] is True
    proc = pooler("check", "--json", f"tests/pools/{name}")
    (checked,) = json.loads(proc.stdout)["files"]
    assert sorted((d["message"], d["lnum"], d["col"], d["severity"]) for d in shown["diagnostics"]) == sorted(
        (*place(p), 1) for p in checked["problems"])


def test_a_saved_change_to_a_file_the_pool_reads_checks_the_pool_again(server: Client,
                                                                         tmp_path: Path) -> None:
    steps = tmp_path / "steps.json"
    steps.write_text('[{"name": "cur", "unit": "U", "command": "C"}]', encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool_source: steps.json\n", encoding="utf-8")
    uri = server.open(pool)
    assert server.diagnostics(uri) == []
    steps_uri = server.open(steps)
    mark = server.mark()
    steps.write_text('[{"name": "cur", "unit": "U", "comand": "C"}]', encoding="utf-8")
    server.notify("textDocument/didSave", {"textDocument": {"uri": steps_uri}})
    told = server.diagnostics(steps_uri, after=mark)
    assert [d["message"] for d in told] == [
        ("Step 1 needs unit and command - command is missing; `pooler tools` lists the store's tools "
         "and their commands."), "Unknown key [comand] in step 1 - did you mean command?"]
    # In the pool, at the line that names the file, each with where it is.
    in_pool = server.diagnostics(uri, after=mark)
    assert [(d["range"]["start"]["line"], d["relatedInformation"][0]["location"]["uri"]) for d in in_pool] \
        == [(0, steps_uri)] * 2


def test_completion_and_hover_of_a_rows_column_come_from_the_data_file(server: Client,
                                                                        tmp_path: Path) -> None:
    (tmp_path / "goods.csv").write_text("sku,name\nA-1,Kettle\nB-2,Teapot\n", encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    text = ("vars:\n  shop: Main\npool:\n  - unit: U\n    command: C\n    for_each: {file: goods.csv}\n"
            "    params: {sku: \"${row.sku}\", name: \"${row.\"}\n")
    pool.write_text(text, encoding="utf-8")
    uri = server.open(pool)
    server.diagnostics(uri)
    params, each = text.splitlines()[6], text.splitlines()[5]
    columns = server.request("textDocument/completion", server.at(uri, 6, params.index('${row."') + 6))
    assert [i["label"] for i in columns["items"]] == ["sku", "name"]
    variables = server.request("textDocument/completion", server.at(uri, 6, params.index('${row."') + 2))
    assert [i["label"] for i in variables["items"]] == ["shop", "row"]
    hover = server.request("textDocument/hover", server.at(uri, 6, params.index("${row.sku}") + 3))
    assert hover["contents"]["value"] == "**column `sku`** of `goods.csv`\n\nfirst values: 'A-1', 'B-2'"
    found = server.request("textDocument/definition", server.at(uri, 5, each.index("goods.csv") + 1))
    assert found["uri"] == uri_of(tmp_path / "goods.csv")


@pytest.mark.parametrize("name", ["bad-schema-and-meaning.yaml", "bad-ref-no-field.yaml",
                                  "bad-row-in-chunk.yaml", "bad-field-no-chunk.yaml"])
def test_with_a_registry_the_diagnostics_are_check_againsts_problems(against: Client, shop: Store,
                                                                     token_file: Path, name: str) -> None:
    proc = pooler("check", "--json", f"tests/pools/{name}", "--against", shop.url,
                  "--token-file", str(token_file))
    (checked,) = json.loads(proc.stdout)["files"]
    # Each holds a problem only the store's declarations show.
    assert any("the command [" in p["message"].lower() for p in checked["problems"])
    uri = against.open(POOLS / name)
    assert [placed(d) for d in against.diagnostics(uri)] == [place(p) for p in checked["problems"]]


def test_completion_after_a_step_and_a_dot_lists_its_declared_detail(against: Client,
                                                                       tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    text = ("pool:\n  - name: kettle\n    unit: MELBIS_AGENT_STORE\n    command: CmdAdd\n"
            "    params: {sku: K-1, name: Kettle}\n  - unit: MELBIS_AGENT_STORE\n    command: CmdGet\n"
            "    params: {sku: \"@kettle.\"}\n")
    pool.write_text(text, encoding="utf-8")
    uri = against.open(pool)
    against.diagnostics(uri)
    line = text.splitlines()[7]
    found = against.request("textDocument/completion", against.at(uri, 7, line.index("@kettle.") + 8))
    assert [(i["label"], i["detail"]) for i in found["items"]] == [
        ("id", "detail of MELBIS_AGENT_STORE.CmdAdd"), ("row", "detail of MELBIS_AGENT_STORE.CmdAdd")]
    hover = against.request("textDocument/hover", against.at(uri, 7, line.index("@kettle.") + 2))
    assert hover["contents"]["value"].startswith("**step 1 `kettle`**: MELBIS_AGENT_STORE.CmdAdd")


def test_a_json_pool_completes_by_its_brackets(against: Client, tmp_path: Path) -> None:
    pool = tmp_path / "pool.json"
    text = ('{"pool": [\n  {"name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",\n'
            '   "params": {"skey": "EUR", "name": "Euro"}},\n'
            '  {"unit": "MELBIS_AGENT_CURRENCY", "command": "CmdUpdate",\n'
            '   "params": {"id": "@", "": 1},\n   "": 1}\n]}\n')
    pool.write_text(text, encoding="utf-8")
    uri = against.open(pool)
    against.diagnostics(uri)
    lines = text.splitlines()

    def labels(line: int, char: int) -> list[str]:
        found = against.request("textDocument/completion", against.at(uri, line, char))
        return [i["label"] for i in found["items"]]

    assert {"CmdAdd", "CmdUpdate"} <= set(labels(3, lines[3].index('"CmdUpdate"') + 1))
    assert labels(4, lines[4].index('"@"') + 2) == ["cur"]
    assert "multiplex" in labels(4, lines[4].index('"": 1') + 1)
    assert {"retry", "for_each", "probe"} <= set(labels(5, 4))


def test_a_registry_given_as_initialization_options_completes_units(tmp_path: Path) -> None:
    saved = tmp_path / "shop-tools.json"
    saved.write_text(json.dumps([json.loads(
        (ROOT / "pooler" / "store" / "tools" / "melbis_agent_order.json").read_text(encoding="utf-8"))]),
        encoding="utf-8")
    client = Client(init={"against": str(saved)})
    try:
        pool = tmp_path / "pool.yaml"
        pool.write_text("pool:\n  - unit: \n", encoding="utf-8")
        uri = client.open(pool)
        client.diagnostics(uri)
        items = client.request("textDocument/completion", client.at(uri, 1, 10))["items"]
        assert [i["label"] for i in items] == ["MELBIS_AGENT_ORDER"]
    finally:
        assert client.close() == 0


def test_hover_on_a_key_shows_the_schemas_words_and_in_params_the_fields(against: Client,
                                                                        tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    text = ("pool:\n  - name: cur\n    unit: MELBIS_AGENT_CURRENCY\n    command: CmdAdd\n"
            "    retry: {attempts: 3}\n    params: {name: Euro, skey: EUR}\n")
    pool.write_text(text, encoding="utf-8")
    uri = against.open(pool)
    against.diagnostics(uri)

    def shown(line: int, char: int) -> str:
        return str(against.request("textDocument/hover", against.at(uri, line, char))["contents"]["value"])

    assert shown(4, 14) == "**attempts**: How many times the call is tried in all: 1 to 10."
    # name is a step's key too; in params it is the command's field.
    assert shown(5, 14) == ("**field of MELBIS_AGENT_CURRENCY.CmdAdd**\n\n"
                            "name (str, required): The name for people.")
    assert shown(1, 6).startswith("**name**: The word later steps use to refer to this one")


def test_a_registry_out_of_reach_is_told_once_and_the_pool_is_checked_without_it(tmp_path: Path) -> None:
    client = Client("--against", "http://127.0.0.1:9", "--timeout", "5")
    try:
        pool = tmp_path / "pool.yaml"
        pool.write_text("pool:\n  - unit: U\n    command: C\n    parms: {}\n", encoding="utf-8")
        uri = client.open(pool)
        assert [d["message"] for d in client.diagnostics(uri)] == [
            "Unknown key [parms] in step 1 - did you mean params?"]
        told = [n["params"] for n in client.notes if n["method"] == "window/showMessage"]
        assert len(told) == 1
        assert told[0]["type"] == 2
        assert told[0]["message"].startswith("pooler lsp: the registry http://127.0.0.1:9 cannot be read: ")
    finally:
        assert client.close() == 0
