"""A pool against the real reference store's tool_list: nothing is sent, everything is told."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import ROOT, STORE_TOKEN, Store, start_store

from pooler.pool.checks import check_against
from pooler.pool.loader import load_pool, load_pool_value
from pooler.pool.model import Pool


def tool_list(store: Store, token: str = STORE_TOKEN) -> list[dict[str, Any]]:
    answer = requests.post(store.url + "/tool_list", json={}, headers={"Authorization": f"Bearer {token}"},
                           timeout=30)
    assert answer.status_code == 200
    tools: list[dict[str, Any]] = answer.json()["data"]["tools"]
    return tools


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = start_store(tmp_path_factory.mktemp("store"))
    yield store
    store.stop()


@pytest.fixture(scope="module")
def tools(shop: Store) -> list[dict[str, Any]]:
    return tool_list(shop)


def pool_of(steps: list[dict[str, Any]], tmp_path: Path) -> Pool:
    return load_pool_value({"pool": steps}, file="<pool>", base=tmp_path)


def told(steps: list[dict[str, Any]], tools: list[dict[str, Any]], tmp_path: Path) -> list[str]:
    return [p.message for p in check_against(pool_of(steps, tmp_path), tools)]


def cur(command: str, **params: Any) -> dict[str, Any]:
    return {"unit": "MELBIS_AGENT_CURRENCY", "command": command, "params": params}


def test_a_misspelled_command(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    assert told([cur("CmdAd", name="Euro")], tools, tmp_path) == [
        ("Unknown command [CmdAd] of MELBIS_AGENT_CURRENCY - did you mean CmdAdd? The tool has: CmdList, "
         "CmdAdd, CmdUpdate, CmdRemove, CmdPos.")]


def test_the_case_of_a_command_is_not_told_apart(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    assert told([cur("cmdadd", name="Euro")], tools, tmp_path) == []


def test_a_misspelled_unit(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    steps = [{"unit": "MELBIS_AGENT_CURENCY", "command": "CmdList"}]
    assert told(steps, tools, tmp_path) == [
        ("No tool [MELBIS_AGENT_CURENCY] in the store - did you mean MELBIS_AGENT_CURRENCY? `pooler tools` "
         "lists the store's tools.")]


def test_a_missing_required_field(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    assert told([cur("CmdAdd", skey="EUR", name=None)], tools, tmp_path) == [
        "The command [CmdAdd] needs the field [name] (str): it is required - add it to params."]


def test_a_field_too_many(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    assert told([cur("CmdAdd", nmae="Euro", name="Euro")], tools, tmp_path) == [
        ("The command [CmdAdd] has no field [nmae] - did you mean name? Its fields: skey, name, multiplex, "
         "division, pos.")]
    assert told([{"unit": "MELBIS_AGENT_STORE", "command": "CmdList", "params": {"all": True}}],
                tools, tmp_path) == ["The command [CmdList] takes no fields, and [all] is given - remove it."]


def test_wrong_types_as_the_store_casts(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    assert told([cur("CmdAdd", name="Euro", multiplex="abc", pos="12", division="no")], tools, tmp_path) == [
        'The field [multiplex] of the command [CmdAdd] takes float: "abc" is not a number.',
        ('The field [division] of the command [CmdAdd] takes bool: "no" is not yes or no - send true, false, '
         '1, 0, "1", "0" or "".'),
    ]
    fine = cur("CmdAdd", name=12, multiplex="1.5", pos="12", division="0", skey="EUR")
    assert told([fine, cur("CmdUpdate", id=[1, "2"]), cur("CmdPos", type="SORT", data={"by": "name"})],
                tools, tmp_path) == []


def test_values_made_at_run_time_are_not_cast(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    steps = [{"name": "c", **cur("CmdAdd", name="Euro")},
             cur("CmdUpdate", id="@c.id", multiplex="${rate}", pos=["${n}"])]
    pool = load_pool_value({"vars": {"rate": 1, "n": 2}, "pool": steps}, base=tmp_path)
    assert check_against(pool, tools) == []


def test_commands_that_carry_files_cannot_be_steps(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    steps = [{"unit": "MELBIS_AGENT_IMPORT_FILES", "command": "CmdAdd", "params": {"profile": "catalog"}}]
    assert told(steps, tools, tmp_path) == [
        ("The command [CmdAdd] of MELBIS_AGENT_IMPORT_FILES carries files, which a pool step cannot - run it "
         "with `pooler call MELBIS_AGENT_IMPORT_FILES CmdAdd --files-source FILE`.")]


def test_a_chunk_goes_into_a_jsonl_field(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    goods = {"unit": "MELBIS_AGENT_IMPORT_GOODS", "command": "CmdAdd", "key": "g-${row.ref}",
             "for_each": {"file": "goods.jsonl", "chunk": 500, "field": "goods"}}
    assert told([goods], tools, tmp_path) == []
    wrong = {"unit": "MELBIS_AGENT_STORE", "command": "CmdAdd", "params": {"sku": "x"},
             "for_each": {"file": "goods.jsonl", "chunk": 5, "field": "name"}}
    unknown = {**goods, "for_each": {"file": "goods.jsonl", "chunk": 5, "field": "good"}}
    assert told([wrong, unknown], tools, tmp_path) == [
        ("for_each.field [name] of step 1 must be a jsonl field of the command [CmdAdd], not str - the "
         "chunk's rows go there as a list."),
        "The command [CmdAdd] has no field [good] - did you mean goods? Its fields: goods.",
        "The command [CmdAdd] needs the field [goods] (jsonl): it is required - add it to params.",
    ]


def test_a_jsonl_field_may_name_a_file_of_rows(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    steps = [{"unit": "MELBIS_AGENT_IMPORT_GOODS", "command": "CmdAdd",
              "params": {"goods": {"file": "g.jsonl"}}}]
    assert told(steps, tools, tmp_path) == []


def test_any_fields_commands_take_anything(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    steps = [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"whatever": [1], "x": None}}]
    assert told(steps, tools, tmp_path) == []


def test_ungranted_commands_for_a_read_token(tmp_path: Path) -> None:
    store = start_store(tmp_path, "--token", "writer", "--read-token", "reader")
    try:
        reader_tools = tool_list(store, "reader")
    finally:
        store.stop()
    steps = [cur("CmdList"), cur("CmdAdd", name="Euro")]
    assert told(steps, reader_tools, tmp_path) == [
        ("The command MELBIS_AGENT_CURRENCY\\CmdAdd is not granted to this token - ask the store's owner for "
         "the grant, or use a token that has it.")]


def test_problems_point_into_the_pool_file(tools: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("pool:\n  - unit: MELBIS_AGENT_CURRENCY\n    command: CmdAdd\n"
                    "    params: {name: Euro, multiplx: 2}\n", encoding="utf-8")
    (problem,) = check_against(load_pool(path), tools)
    assert problem.headline() == (
        f"{path}:4:26: The command [CmdAdd] has no field [multiplx] - did you mean multiplex? Its fields: "
        "skey, name, multiplex, division, pos.")


def test_the_good_pools_pass_and_nothing_is_sent(shop: Store, tools: list[dict[str, Any]]) -> None:
    before = shop.ops()
    for name in ("good-seed.json", "good-full.yaml", "good-merge.yaml"):
        assert check_against(load_pool(ROOT / "tests" / "pools" / name), tools) == [], name
    assert shop.ops() == before


def test_a_reference_to_a_detail_field_a_declaration_tells(tmp_path: Path) -> None:
    # A store that declares a command's detail has references to it checked by it.
    declared: list[dict[str, Any]] = [{"unit": "X", "commands": [
        {"name": "CmdAdd", "granted": True, "params": [], "detail": ["id", "row"]},
        {"name": "CmdUse", "granted": True, "params": [{"name": "id", "type": "int", "required": True}]}]}]
    steps: list[dict[str, Any]] = [{"name": "a", "unit": "X", "command": "CmdAdd"},
                                   {"unit": "X", "command": "CmdUse", "params": {"id": "@a.idd"}},
                                   {"unit": "X", "command": "CmdUse", "params": {"id": "@a.row.id"}}]
    assert told(steps, declared, tmp_path) == [
        "@a.idd names a field the detail of that step does not have - did you mean id? Its detail: id, row."]
