"""Stores shared by the store's tests, which do not disturb each other: each test uses skus,
contracts and markers of its own and counts ops as a difference, so one store serves them all
(starting a store is the slowest part of these tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Store, start_store

# A registry folder that redeclares the test tool: CmdEcho with a field of every type, so a call
# shows what the engine cast; a command without a function; CmdCrash taking files.
TYPED = [
    {"name": f"f_{t.replace('/', '_')}", "type": t, "required": False, "default": "", "descr": ""}
    for t in (
        "str",
        "int",
        "float",
        "bool",
        "datetime",
        "json",
        "int/json",
        "str/json",
        "float/json",
        "datetime/json",
        "jsonl",
    )
]
TEST_REDECLARED = {
    "unit": "MELBIS_AGENT_TEST",
    "module": "melbis_agent_test.php",
    "name": "Test Bench",
    "descr": "",
    "commands": [
        {
            "name": "CmdEcho",
            "descr": "",
            "params": [
                *TYPED,
                {"name": "d_int", "type": "int", "required": False, "default": "7", "descr": ""},
                {"name": "d_float", "type": "float", "required": False, "default": "0.00", "descr": ""},
                {"name": "d_bool", "type": "bool", "required": False, "default": "false", "descr": ""},
                {"name": "d_bool_on", "type": "bool", "required": False, "default": "1", "descr": ""},
                {"name": "d_json", "type": "json", "required": False, "default": "[1, 2]", "descr": ""},
                {"name": "d_none", "type": "str", "required": False, "default": "", "descr": ""},
                {"name": "store.price", "type": "float", "required": False, "default": "", "descr": ""},
            ],
        },
        {"name": "CmdMissing", "descr": "declared, with no function", "params": []},
        {
            "name": "CmdCrash",
            "descr": "",
            "params": [{"name": "files", "type": "files", "required": True, "default": "", "descr": ""}],
        },
        {"name": "CmdOps", "descr": "", "params": []},
    ],
}
EXTRA_TOOL = {
    "unit": "ACME_WIDGETS",
    "module": "acme_widgets.php",
    "name": "Widgets",
    "descr": "not in this store",
    "commands": [
        {
            "name": "CmdAdd",
            "descr": "adds a widget",
            "params": [
                {"name": "name", "type": "str", "required": True, "default": "", "descr": "its name"},
                {"name": "files", "type": "files", "required": False, "default": "", "descr": "pictures"},
            ],
        },
        {"name": "CmdList", "descr": "", "params": []},
    ],
}


def write_registry(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "melbis_agent_test.json").write_text(json.dumps(TEST_REDECLARED), encoding="utf-8")
    (folder / "acme_widgets.json").write_text(json.dumps(EXTRA_TOOL), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A plain store, started once."""
    s = start_store(tmp_path_factory.mktemp("store"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A store with the redeclared test tool and a declared tool that has no module."""
    tmp = tmp_path_factory.mktemp("typed")
    s = start_store(tmp, "--registry", str(write_registry(tmp / "registry")))
    yield s
    s.stop()
