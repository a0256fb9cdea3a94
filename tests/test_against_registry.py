"""``pooler check POOL --against URL`` with a tool the store declares through ``--registry DIR``.

The tool is this test's own (a JSON declaration in the format of contract §1, with required fields,
types and defaults as strings), so the check is known to read the store's declarations and not a
list of its own: every problem below names the declared tool, its commands and its fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Store, pooler, start_store

UNIT = "MELBIS_AGENT_PRICES"
DECLARATION = {
    "unit": UNIT,
    "module": "melbis_agent_prices.php",
    "name": "Prices",
    "descr": "The prices of goods in each currency.",
    "commands": [
        {"name": "CmdSet", "descr": "Sets the price of goods in a currency.", "params": [
            {"name": "sku", "type": "str", "required": True, "default": "", "descr": "The goods."},
            {"name": "price", "type": "float", "required": True, "default": "", "descr": "The price."},
            {"name": "curr_id", "type": "int", "required": False, "default": "1", "descr": "The currency."},
            {"name": "active", "type": "bool", "required": False, "default": "true", "descr": "Shown."},
            {"name": "valid_from", "type": "datetime", "required": False, "default": "", "descr": "From."},
        ]},
        {"name": "CmdGet", "descr": "The prices of goods.", "params": [
            {"name": "sku", "type": "str", "required": True, "default": "", "descr": "The goods."},
        ]},
    ],
}

WRONG = """\
pool:
  - name: set
    unit: MELBIS_AGENT_PRICES
    command: CmdSett
    params: {sku: TEA-1, price: 4.5}
  - name: nosku
    unit: MELBIS_AGENT_PRICES
    command: CmdSet
    params: {price: 4.5}
  - name: extra
    unit: MELBIS_AGENT_PRICES
    command: CmdSet
    params: {sku: TEA-1, price: 4.5, prise: 5}
  - name: types
    unit: MELBIS_AGENT_PRICES
    command: CmdSet
    params: {sku: TEA-1, price: cheap, curr_id: EUR, active: maybe, valid_from: tomorrow}
  - {name: bare, unit: MELBIS_AGENT_PRICES, command: CmdGet}
  - name: unit
    unit: MELBIS_AGENT_PRICE
    command: CmdGet
    params: {sku: TEA-1}
"""

RIGHT = """\
vars:
  sku: TEA-1
pool:
  - name: set
    unit: MELBIS_AGENT_PRICES
    command: CmdSet
    params: {sku: "${sku}", price: "4.50", curr_id: "2", active: 0, valid_from: "2026-12-01 00:00:00"}
  - {name: get, unit: melbis_agent_prices, command: cmdget, params: {sku: "@set.sku"}}
  - {name: goods, unit: MELBIS_AGENT_STORE, command: CmdGet, params: {sku: "${sku}"}}
"""


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp = tmp_path_factory.mktemp("priced")
    registry = tmp / "registry"
    registry.mkdir()
    (registry / "melbis_agent_prices.json").write_text(json.dumps(DECLARATION), encoding="utf-8")
    store = start_store(tmp, "--registry", str(registry))
    yield store
    store.stop()


def check(store: Store, pool: Path) -> tuple[int, list[str], str]:
    proc = pooler("check", str(pool), "--against", store.url, env={"POOLER_TOKEN": store.token})
    headlines = [line for line in proc.stdout.splitlines() if line.startswith(f"{pool}:")]
    return proc.returncode, headlines, proc.stdout


def test_every_problem_with_its_place_and_nothing_sent(priced: Store, tmp_path: Path) -> None:
    pool = tmp_path / "wrong.yaml"
    pool.write_text(WRONG, encoding="utf-8")
    status, headlines, out = check(priced, pool)
    assert status == 2, out
    assert headlines == [
        (f"{pool}:4:14: Unknown command [CmdSett] of {UNIT} - did you mean CmdSet? The tool has: CmdSet, "
         "CmdGet."),
        f"{pool}:9:13: The command [CmdSet] needs the field [sku] (str): it is required - add it to params.",
        (f"{pool}:13:38: The command [CmdSet] has no field [prise] - did you mean price? Its fields: sku, "
         "price, curr_id, active, valid_from."),
        f'{pool}:17:33: The field [price] of the command [CmdSet] takes float: "cheap" is not a number.',
        f'{pool}:17:49: The field [curr_id] of the command [CmdSet] takes int: "EUR" is not a whole number.',
        (f'{pool}:17:62: The field [active] of the command [CmdSet] takes bool: "maybe" is not yes or no - '
         'send true, false, 1, 0, "1", "0" or "".'),
        (f'{pool}:17:81: The field [valid_from] of the command [CmdSet] takes datetime: "tomorrow" is not a '
         'date and time - send "YYYY-MM-DD HH:MM:SS".'),
        f"{pool}:18:5: The command [CmdGet] needs the field [sku] (str): it is required - add it to params.",
        (f"{pool}:20:11: No tool [MELBIS_AGENT_PRICE] in the store - did you mean {UNIT}? `pooler tools` "
         "lists the store's tools."),
    ]
    # Each headline is followed by its line and a caret under the column it names.
    caret = "   13 |     params: {sku: TEA-1, price: 4.5, prise: 5}\n      |" + " " * 38 + "^\n"
    assert caret in out
    assert out.splitlines()[-1] == "9 problems in 1 of 1 file"
    assert priced.ops() == []
    # Without --against the file is valid: every one of those problems came from the declaration.
    assert pooler("check", str(pool)).returncode == 0


def test_a_pool_that_keeps_to_the_declaration_is_valid(priced: Store, tmp_path: Path) -> None:
    pool = tmp_path / "right.yaml"
    pool.write_text(RIGHT, encoding="utf-8")
    status, headlines, out = check(priced, pool)
    assert (status, headlines, out) == (0, [], f"1 file valid against {priced.url}\n")
    assert priced.ops() == []


def test_the_declared_tool_is_the_stores_own_word(priced: Store) -> None:
    # tool_list carries the declaration as written: what the check above was made against.
    proc = pooler("tools", UNIT, "--store", priced.url, "--json", env={"POOLER_TOKEN": priced.token})
    assert proc.returncode == 0, proc.stderr
    (tool,) = json.loads(proc.stdout)["tools"]
    assert [c["name"] for c in tool["commands"]] == ["CmdSet", "CmdGet"]
    assert tool["commands"][0]["params"][2] == {"name": "curr_id", "type": "int", "required": False,
                                                "default": "1", "descr": "The currency."}
    # A call of it reaches a store that has no module for it: the check is the only safe look.
    call = priced.call(UNIT, "CmdGet", {"sku": "TEA-1"})
    assert (call.status_code, call.text) == (500, "Module not found! [units/melbis_agent_prices.php]")
    assert priced.ops() == []
