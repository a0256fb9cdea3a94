"""A shop's own tool export, read by ``pooler store serve --registry`` and ``pooler check --against``.

A Melbis shop exports one JSON file per tool whose ``unit`` is the module file's name; tool_list
names the address in ``unit`` and the file in ``module``. Both load; anything else is refused with
the file, the key and an example. ``check --against`` takes such a folder, or a saved tool_list, and
checks offline: no store, nothing written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, pooler, start_store

PARAMS = [{"name": "name", "type": "str", "required": True, "default": "", "descr": "The brand's name."},
          {"name": "pos", "type": "int", "required": False, "default": "0", "descr": "Its place."}]
#: As a shop writes it: unit is the module file, and there is no address.
EXPORT = {"unit": "melbis_agent_brand.php", "name": "Brands", "descr": "The shop's brands.",
          "commands": [{"name": "CmdAdd", "descr": "Adds a brand.", "params": PARAMS}]}
#: As tool_list lists it: the address in unit, the file in module.
LISTED = {"unit": "MELBIS_AGENT_COLOUR", "module": "melbis_agent_colour.php", "name": "Colours", "descr": "",
          "commands": [{"name": "CmdAdd", "descr": "Adds a colour.", "params": PARAMS[:1]}]}
FORMS = ('a shop\'s export names the module file in unit: {"unit": "melbis_agent_brand.php", "commands": '
         '[...]}; a tool_list names the address and the file: {"unit": "MELBIS_AGENT_BRAND", "module": '
         '"melbis_agent_brand.php", "commands": [...]}')

GOOD = """\
pool:
  - {name: brand, unit: MELBIS_AGENT_BRAND, command: CmdAdd, params: {name: Acme, pos: 2}}
  - {name: colour, unit: MELBIS_AGENT_COLOUR, command: CmdAdd, params: {name: Red}}
"""
BAD = """\
pool:
  - {name: brand, unit: MELBIS_AGENT_BRAND, command: CmdAdd, params: {nmae: Acme, pos: two}}
  - {name: colour, unit: MELBIS_AGENT_COLOUR, command: CmdAd, params: {name: Red}}
"""


def export_folder(tmp_path: Path, *docs: dict[str, Any]) -> Path:
    folder = tmp_path / "ai_tools"
    folder.mkdir(exist_ok=True)
    for doc in docs:
        stem = str(doc.get("module") or doc.get("unit") or "x").lower().removesuffix(".php")
        (folder / f"{stem}.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return folder


def refusal_of_serve(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pooler", "store", "serve", "--port", "0", "--registry",
                           str(folder), "--db", str(folder.parent / "s.db")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)


def test_the_store_serves_a_shops_export_exactly_as_written(tmp_path: Path) -> None:
    store = start_store(tmp_path, "--registry", str(export_folder(tmp_path, EXPORT, LISTED)))
    try:
        listed = answer_of(pooler("tools", "--store", store.url, "--json", env={"POOLER_TOKEN": store.token}))
        tools = {t["unit"]: t for t in listed["tools"]}
        assert tools["MELBIS_AGENT_BRAND"]["module"] == "melbis_agent_brand.php"
        assert tools["MELBIS_AGENT_COLOUR"]["module"] == "melbis_agent_colour.php"
        assert [p["name"] for p in tools["MELBIS_AGENT_BRAND"]["commands"][0]["params"]] == ["name", "pos"]
        # Declared, with no module behind it: the store's crash, as contract section 4 says.
        called = pooler("call", "MELBIS_AGENT_BRAND", "CmdAdd", "--params", '{"name": "Acme"}', "--store",
                        store.url, "--json", "--out", str(tmp_path / "out"),
                        env={"POOLER_TOKEN": store.token})
        assert answer_of(called)["message"] == "Module not found! [units/melbis_agent_brand.php]"
    finally:
        store.stop()


@pytest.mark.parametrize(("doc", "message"), [
    ({**LISTED, "module": None, "unit": "MELBIS_AGENT_COLOUR"},
     f'unit is "MELBIS_AGENT_COLOUR" and module is missing - {FORMS}'),
    ({k: v for k, v in EXPORT.items() if k != "unit"}, f"unit is missing - {FORMS}"),
    ({**LISTED, "unit": "MELBIS_AGENT_COLOR"},
     (f'unit is "MELBIS_AGENT_COLOR", but the address of melbis_agent_colour.php is MELBIS_AGENT_COLOUR '
      f"(its name upper-cased, no .php) - {FORMS}")),
    ({**LISTED, "module": "Colour.PHP"},
     f'module is "Colour.PHP", not a module file\'s name like "melbis_agent_brand.php" - {FORMS}'),
])
@pytest.mark.process
def test_anything_else_is_refused_with_the_file_the_key_and_an_example(tmp_path: Path, doc: dict[str, Any],
                                                                      message: str) -> None:
    if doc.get("module") is None:
        doc = {k: v for k, v in doc.items() if k != "module"}
    folder = export_folder(tmp_path, doc)
    [path] = folder.glob("*.json")
    proc = refusal_of_serve(folder)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert f"{path}: {message}" in proc.stderr
    # The same words when the folder is given to check --against.
    pool = tmp_path / "p.yaml"
    pool.write_text(GOOD, encoding="utf-8")
    checked = pooler("check", str(pool), "--against", str(folder))
    assert checked.returncode == 2
    assert f"{path}: {message}" in checked.stderr


def snapshot(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*")}


def test_check_against_a_folder_of_exports_works_offline_and_writes_nothing(tmp_path: Path) -> None:
    folder = export_folder(tmp_path, EXPORT, LISTED)
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD, encoding="utf-8")
    bad.write_text(BAD, encoding="utf-8")
    before = snapshot(tmp_path)
    # No store anywhere: POOLER_STORE unset, nothing listening.
    ok = pooler("check", str(good), "--against", str(folder), cwd=tmp_path)
    assert (ok.returncode, ok.stdout) == (0, f"1 file valid against {folder}\n"), ok.stderr
    wrong = pooler("check", str(bad), "--against", str(folder), "--json", cwd=tmp_path)
    assert wrong.returncode == 2
    messages = [p["message"] for f in answer_of(wrong)["files"] for p in f["problems"]]
    assert messages == [
        "The command [CmdAdd] has no field [nmae] - did you mean name? Its fields: name, pos.",
        "The command [CmdAdd] needs the field [name] (str): it is required - add it to params.",
        "The field [pos] of the command [CmdAdd] takes int: \"two\" is not a whole number.",
        "Unknown command [CmdAd] of MELBIS_AGENT_COLOUR - did you mean CmdAdd? The tool has: CmdAdd.",
    ], messages
    assert snapshot(tmp_path) == before


def test_check_against_a_saved_tool_list_knows_the_grants(store_factory: Any, tmp_path: Path) -> None:
    store: Store = store_factory("--token", "full-1", "--read-token", "read-1")
    saved = tmp_path / "shop-tools.json"
    proc = pooler("tools", "--store", store.url, "--json", env={"POOLER_TOKEN": "read-1"})
    assert proc.returncode == 0, proc.stderr
    saved.write_text(proc.stdout, encoding="utf-8")
    store.stop()
    pool = tmp_path / "p.yaml"
    pool.write_text("pool:\n  - {unit: MELBIS_AGENT_CURRENCY, command: CmdList}\n"
                    "  - {unit: MELBIS_AGENT_CURRENCY, command: CmdAdd, params: {name: Euro, pos: first}}\n",
                    encoding="utf-8")
    before = snapshot(tmp_path)
    checked = pooler("check", str(pool), "--against", str(saved))
    assert checked.returncode == 2
    assert [line.split(": ", 1)[1] for line in checked.stdout.splitlines() if ":3:" in line] == [
        ("The command MELBIS_AGENT_CURRENCY\\CmdAdd is not granted to this token - ask the store's owner for "
         "the grant, or use a token that has it."),
        "The field [pos] of the command [CmdAdd] takes int: \"first\" is not a whole number.",
    ]
    assert snapshot(tmp_path) == before


def test_a_saved_file_that_holds_no_tools_is_refused(tmp_path: Path) -> None:
    saved = tmp_path / "shop-tools.json"
    saved.write_text('{"result": false, "message": "nope"}', encoding="utf-8")
    pool = tmp_path / "p.yaml"
    pool.write_text(GOOD, encoding="utf-8")
    proc = pooler("check", str(pool), "--against", str(saved))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"{saved}: --against {saved} holds no tools: expected tool_list's ")
