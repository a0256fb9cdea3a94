"""The engine's refusals and its casting of fields, with their exact texts."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from helpers import STORE_TOKEN, Store
from storekit import TEST, crash, data, envelope, refusal

CUR = "MELBIS_AGENT_CURRENCY"


def _post(store: Store, body: dict[str, Any]) -> dict[str, Any]:
    resp = requests.post(
        f"{store.url}/tool_run", json=body, headers={"Authorization": f"Bearer {STORE_TOKEN}"}, timeout=10
    )
    assert resp.status_code == 200
    doc: dict[str, Any] = resp.json()
    assert doc["ok"] is True
    assert doc["data"]["result"] is False
    got: dict[str, Any] = doc["data"]
    assert (got["detail"], got["tables"], got["files"]) == ({}, {}, [])
    return got


def test_unit_and_command_are_required(shared: Store) -> None:
    unit = "unit is required - name the tool's address from tool_list, like MELBIS_AGENT_CURRENCY."
    command = "command is required - name one of the tool's commands from tool_list, like CmdList."
    assert _post(shared, {"command": "CmdList"})["message"] == unit
    assert _post(shared, {"unit": "  ", "command": "CmdList"})["message"] == unit
    assert _post(shared, {"unit": 5, "command": "CmdList"})["message"] == unit
    assert _post(shared, {"unit": CUR})["message"] == command
    assert _post(shared, {"unit": CUR, "command": None})["message"] == command


def test_unknown_tool(shared: Store) -> None:
    assert refusal(shared, "MELBIS_AGENT_NOPE", "CmdList") == "ACCESS_DENIED: no such tool: MELBIS_AGENT_NOPE"


def test_unknown_command_lists_the_tools_commands_in_order(shared: Store) -> None:
    assert (
        refusal(shared, CUR, "CmdNope")
        == "Unknown command [CmdNope]. The tool has: CmdList, CmdAdd, CmdUpdate, CmdRemove, CmdPos"
    )


def test_command_and_unit_are_found_whatever_their_case(shared: Store) -> None:
    assert data(shared, CUR, "cmdlist")["message"] == "The tables asked for"
    assert data(shared, "melbis_agent_currency", "CMDLIST")["message"] == "The tables asked for"
    ops = shared.ops()
    assert (ops[-1]["unit"], ops[-1]["command"]) == (CUR, "CmdList")


def test_a_field_too_many(shared: Store) -> None:
    assert (
        refusal(shared, CUR, "CmdAdd", {"name": "X", "nmae": "Y"})
        == "The command [CmdAdd] has no field [nmae] - did you mean name? Its fields: skey, name, multiplex, "
        "division, pos."
    )
    assert (
        refusal(shared, CUR, "CmdAdd", {"name": "X", "colour": "red", "size": 2})
        == "The command [CmdAdd] has no fields [colour], [size]. Its fields: skey, name, multiplex, "
        "division, pos."
    )
    assert (
        refusal(shared, CUR, "CmdList", {"page": 2})
        == "The command [CmdList] takes no fields, and [page] came - send it without params."
    )


def test_a_required_field_missing(shared: Store) -> None:
    assert (
        refusal(shared, CUR, "CmdAdd", {"skey": "EUR"})
        == "The command [CmdAdd] needs the field [name] (str): it is required."
    )
    assert (
        refusal(shared, "MELBIS_AGENT_STORE", "CmdAdd", {})
        == "The command [CmdAdd] needs the fields [sku], [name]: they are required."
    )


def test_a_null_field_counts_as_unnamed(shared: Store) -> None:
    assert (
        refusal(shared, CUR, "CmdAdd", {"name": None})
        == "The command [CmdAdd] needs the field [name] (str): it is required."
    )
    cid = data(shared, CUR, "CmdAdd", {"name": "Nulls", "multiplex": None, "pos": None})["detail"]["id"]
    row = next(r for r in data(shared, CUR, "CmdList")["tables"]["currency"] if r["id"] == str(cid))
    assert row["multiplex"] == "1.0000"  # the default, as if multiplex were not named
    # a null field not declared is not "a field too many" either
    assert data(shared, CUR, "CmdList", {"page": None})["result"] is True


def test_params_and_files_of_the_wrong_kind(shared: Store) -> None:
    assert (
        _post(shared, {"unit": CUR, "command": "CmdList", "params": [1]})["message"]
        == 'params is an object of fields - send {"name": value, ...}.'
    )
    assert (
        _post(shared, {"unit": CUR, "command": "CmdList", "files": {"a": 1}})["message"]
        == 'files is a list of entries - send [{"part": "data_1", "entity": "store", "elem_id": <id>}, ...].'
    )
    assert (
        _post(shared, {"unit": CUR, "command": "CmdList", "debug": "maybe"})["message"]
        == "debug is true or false."
    )


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("multiplex", "abc", '"abc" is not a number'),
        ("multiplex", True, "true is not a number"),
        ("multiplex", [1], "[1] is not a number"),
        ("pos", "12.5", '"12.5" is not a whole number'),
        ("pos", 1.5, "1.5 is not a whole number"),
        ("pos", "1_000", '"1_000" is not a whole number'),
        ("pos", 2**63, "9223372036854775808 is out of range for a whole number"),
        ("division", "maybe", '"maybe" is not yes or no - send true, false, 1, 0, "1", "0" or ""'),
        ("division", 2, '2 is not yes or no - send true, false, 1, 0, "1", "0" or ""'),
        ("name", {"a": 1}, '{"a": 1} is not text'),
        ("name", False, "false is not text"),
    ],
)
def test_a_value_that_cannot_be_cast(shared: Store, field: str, value: Any, why: str) -> None:
    type_ = {"multiplex": "float", "pos": "int", "division": "bool", "name": "str"}[field]
    params = {"name": "Cast", field: value}
    assert (
        refusal(shared, CUR, "CmdAdd", params)
        == f"The field [{field}] of the command [CmdAdd] takes {type_}: {why}."
    )


def test_list_types_refuse_a_bad_element(shared: Store) -> None:
    assert (
        refusal(shared, CUR, "CmdRemove", {"id": [1, "x"]})
        == "The field [id] of the command [CmdRemove] takes int/json: element 2 of the list: "
        '"x" is not a whole number.'
    )
    assert refusal(shared, CUR, "CmdRemove", {"id": "[1,"}).startswith(
        'The field [id] of the command [CmdRemove] takes int/json: "[1," is not JSON ('
    )


def test_jsonl_takes_a_list_of_row_objects(shared: Store) -> None:
    unit = "MELBIS_AGENT_IMPORT_GOODS"
    assert (
        refusal(shared, unit, "CmdAdd", {"goods": [{"sku": "a", "name": "A"}, 5]})
        == "The field [goods] of the command [CmdAdd] takes jsonl: row 2 is 5, not an object."
    )
    assert (
        refusal(shared, unit, "CmdAdd", {"goods": {"sku": "a"}})
        == 'The field [goods] of the command [CmdAdd] takes jsonl: {"sku": "a"} is not a list of rows.'
    )


def test_json_field_parses_a_string_and_refuses_one_that_is_not_json(shared: Store) -> None:
    message = refusal(shared, CUR, "CmdPos", {"type": "SORT", "data": "{by: name}"})
    assert message.startswith(
        'The field [data] of the command [CmdPos] takes json: "{by: name}" is not JSON ('
    )


# -- casting seen end to end, through a CmdEcho redeclared with a field of every type --------------


@pytest.mark.parametrize(
    ("field", "value", "cast"),
    [
        ("f_str", "text", "text"),
        ("f_str", 12, "12"),
        ("f_str", 2.0, "2"),
        ("f_str", 2.5, "2.5"),
        ("f_int", "12", 12),
        ("f_int", " -3 ", -3),
        ("f_int", 4.0, 4),
        ("f_float", "1.5", 1.5),
        ("f_float", 2, 2.0),
        ("f_float", "1e3", 1000.0),
        ("f_bool", "true", True),
        ("f_bool", "TRUE", True),
        ("f_bool", 1, True),
        ("f_bool", "1", True),
        ("f_bool", "false", False),
        ("f_bool", 0, False),
        ("f_bool", "0", False),
        ("f_bool", "", False),
        ("f_datetime", "2026-09-18 14:05:00", "2026-09-18 14:05:00"),
        ("f_datetime", "2026-09-18T14:05:07", "2026-09-18 14:05:07"),
        ("f_datetime", "2026-09-18", "2026-09-18 00:00:00"),
        ("f_json", '{"a": [1, 2]}', {"a": [1, 2]}),
        ("f_json", {"a": 1}, {"a": 1}),
        ("f_json", "[]", []),
        ("f_int_json", "7", 7),
        ("f_int_json", [1, "2"], [1, 2]),
        ("f_int_json", "[1, 2]", [1, 2]),
        ("f_str_json", ["a", 1], ["a", "1"]),
        ("f_str_json", "plain", "plain"),
        ("f_float_json", '[1, "2.5"]', [1.0, 2.5]),
        (
            "f_datetime_json",
            ["2026-01-02 03:04:05", "2026-01-03T00:00:00"],
            ["2026-01-02 03:04:05", "2026-01-03 00:00:00"],
        ),
        ("f_jsonl", [{"a": 1}, {"b": 2}], [{"a": 1}, {"b": 2}]),
        ("f_jsonl", '[{"a": 1}]', [{"a": 1}]),
        ("store.price", "9.99", 9.99),
    ],
)
def test_cast_as_a_php_store_does(typed: Store, field: str, value: Any, cast: Any) -> None:
    detail = data(typed, TEST, "CmdEcho", {field: value})["detail"]
    assert detail[field] == cast
    assert type(detail[field]) is type(cast)


def test_defaults_are_cast_to_the_fields_type(typed: Store) -> None:
    detail = data(typed, TEST, "CmdEcho")["detail"]
    assert detail == {"d_int": 7, "d_float": 0.0, "d_bool": False, "d_bool_on": True, "d_json": [1, 2]}
    assert isinstance(detail["d_float"], float)
    assert "d_none" not in detail  # "" is no default
    assert data(typed, TEST, "CmdEcho", {"d_int": "8"})["detail"]["d_int"] == 8


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("f_datetime", "tomorrow", '"tomorrow" is not a date and time - send "YYYY-MM-DD HH:MM:SS"'),
        ("f_datetime", 20260918, '20260918 is not a date and time - send "YYYY-MM-DD HH:MM:SS"'),
        ("f_float", "nan", '"nan" is not a number'),
        ("f_float", "1e400", '"1e400" is too large a number'),
        ("f_float_json", [1, "x"], 'element 2 of the list: "x" is not a number'),
        ("f_jsonl", "nope", '"nope" is not JSON (Expecting value: line 1 column 1 (char 0))'),
    ],
)
def test_typed_refusals(typed: Store, field: str, value: Any, why: str) -> None:
    type_ = field[2:].replace("_json", "/json")
    assert (
        refusal(typed, TEST, "CmdEcho", {field: value})
        == f"The field [{field}] of the command [CmdEcho] takes {type_}: {why}."
    )


def test_a_declared_command_without_a_function(typed: Store) -> None:
    assert crash(typed, TEST, "CmdMissing") == "Function not found! [MELBIS_AGENT_TEST\\CmdMissing]"
    assert crash(typed, TEST, "cmdmissing") == "Function not found! [MELBIS_AGENT_TEST\\CmdMissing]"


def test_a_redeclared_tool_has_only_its_declared_commands(typed: Store) -> None:
    assert (
        refusal(typed, TEST, "CmdFail")
        == "Unknown command [CmdFail]. The tool has: CmdEcho, CmdMissing, CmdCrash, CmdOps"
    )


def test_a_declared_tool_without_a_module(typed: Store) -> None:
    before = len(typed.ops())
    assert (
        crash(typed, "ACME_WIDGETS", "CmdAdd", {"name": "w"}) == "Module not found! [units/acme_widgets.php]"
    )
    # the declaration is checked first, like any other
    assert (
        refusal(typed, "ACME_WIDGETS", "CmdAdd", {})
        == "The command [CmdAdd] needs the field [name] (str): it is required."
    )
    assert (
        refusal(typed, "ACME_WIDGETS", "CmdDrop")
        == "Unknown command [CmdDrop]. The tool has: CmdAdd, CmdList"
    )
    assert len(typed.ops()) == before


def test_the_registry_folder_shows_in_tool_list(typed: Store) -> None:
    doc = requests.post(
        f"{typed.url}/tool_list", json={}, headers={"Authorization": f"Bearer {STORE_TOKEN}"}, timeout=10
    ).json()
    tools = {t["unit"]: t for t in doc["data"]["tools"]}
    acme = tools["ACME_WIDGETS"]
    assert acme["module"] == "acme_widgets.php"
    assert acme["name"] == "Widgets"
    assert [c["name"] for c in acme["commands"]] == ["CmdAdd", "CmdList"]
    assert acme["commands"][0]["params"][0] == {
        "name": "name",
        "type": "str",
        "required": True,
        "default": "",
        "descr": "its name",
    }
    assert [c["name"] for c in tools[TEST]["commands"]] == ["CmdEcho", "CmdMissing", "CmdCrash", "CmdOps"]
    assert "MELBIS_AGENT_CURRENCY" in tools


def test_an_answer_with_a_module_time_when_refused_by_the_module(shared: Store) -> None:
    doc = envelope(shared, TEST, "CmdFail")
    assert isinstance(doc["unit_ms"], int)
