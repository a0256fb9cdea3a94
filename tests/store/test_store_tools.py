"""Every tool of the reference store, through a real server: the answers of contract section 4."""

from __future__ import annotations

import json
import threading
from typing import Any

import requests
from helpers import STORE_TOKEN, Store
from storekit import TEST, crash, data, envelope, refusal, unique

CUR = "MELBIS_AGENT_CURRENCY"
GOODS = "MELBIS_AGENT_STORE"


def _currency(store: Store, name: str, **fields: Any) -> int:
    got = data(store, CUR, "CmdAdd", {"name": name, **fields})
    assert got["message"] == "The row of currency is added"
    cid: int = got["detail"]["id"]
    assert isinstance(cid, int)
    return cid


def _currencies(store: Store) -> dict[str, dict[str, str]]:
    rows = data(store, CUR, "CmdList")["tables"]["currency"]
    return {r["id"]: r for r in rows}


def test_currency_list_gives_every_value_as_a_string(shared: Store) -> None:
    cid = _currency(shared, "Euro", skey="EUR", multiplex=44.2, division=True)
    row = _currencies(shared)[str(cid)]
    assert row == {
        "id": str(cid),
        "skey": "EUR",
        "name": "Euro",
        "multiplex": "44.2000",
        "division": "1",
        "pos": row["pos"],
    }
    assert all(isinstance(v, str) for v in row.values())


def test_currency_add_fills_defaults_and_places_at_the_end(shared: Store) -> None:
    first = _currency(shared, "Alpha")
    second = _currency(shared, "Beta")
    rows = _currencies(shared)
    assert rows[str(first)]["multiplex"] == "1.0000"
    assert rows[str(first)]["division"] == "0"
    assert rows[str(first)]["skey"] == ""
    assert int(rows[str(second)]["pos"]) == int(rows[str(first)]["pos"]) + 1


def test_currency_add_refuses_a_rate_of_zero(shared: Store) -> None:
    assert (
        refusal(shared, CUR, "CmdAdd", {"name": "Null", "multiplex": 0})
        == "multiplex is the rate, and it must be above zero."
    )


def test_currency_update_one_and_a_list(shared: Store) -> None:
    a, b = _currency(shared, "One"), _currency(shared, "Two")
    got = data(shared, CUR, "CmdUpdate", {"id": a, "name": "Uno"})
    assert got["detail"] == {"found": 1}
    assert got["message"] == "1 of 1 currencies updated"
    got = data(shared, CUR, "CmdUpdate", {"id": [a, b, 999999], "skey": "X", "division": "true"})
    assert got["detail"] == {"found": 2}
    rows = _currencies(shared)
    assert rows[str(a)]["name"] == "Uno"
    assert (rows[str(a)]["skey"], rows[str(b)]["skey"]) == ("X", "X")
    assert rows[str(b)]["division"] == "1"
    # a JSON string of a list is a list too
    assert data(shared, CUR, "CmdUpdate", {"id": f"[{a}, {b}]", "pos": 50})["detail"] == {"found": 2}


def test_currency_remove(shared: Store) -> None:
    a, b = _currency(shared, "Gone1"), _currency(shared, "Gone2")
    got = data(shared, CUR, "CmdRemove", {"id": [a, b, 999998]})
    assert got["detail"] == {"removed": 2}
    assert str(a) not in _currencies(shared)
    assert data(shared, CUR, "CmdRemove", {"id": a})["detail"] == {"removed": 0}


def test_currency_pos_move_sort(shared: Store) -> None:
    ids = [_currency(shared, n, skey=k) for n, k in (("Zed", "A"), ("Yen", "B"), ("Xi", "C"))]
    got = data(shared, CUR, "CmdPos", {"type": "POS", "data": [{"id": ids[0], "pos": 900}, {"id": ids[1]}]})
    assert got["detail"]["moved"] >= 2
    rows = _currencies(shared)
    assert rows[str(ids[0])]["pos"] == "900"
    assert rows[str(ids[1])]["pos"] == "2"  # an entry without pos takes its place in the list
    data(shared, CUR, "CmdPos", {"type": "move", "data": {"id": ids[2], "pos": 1}})
    assert _currencies(shared)[str(ids[2])]["pos"] == "1"
    data(shared, CUR, "CmdPos", {"type": "SORT", "data": '{"by": "name"}'})
    by_pos = sorted(_currencies(shared).values(), key=lambda r: int(r["pos"]))
    assert [r["name"] for r in by_pos] == sorted(r["name"] for r in by_pos)
    assert (
        refusal(shared, CUR, "CmdPos", {"type": "SHUFFLE"}) == "type [SHUFFLE] is not one of POS, MOVE, SORT."
    )
    assert (
        refusal(shared, CUR, "CmdPos", {"type": "MOVE", "data": {"id": 1}})
        == 'MOVE takes data {"id": <id>, "pos": <place>}.'
    )


def test_goods_add_get_list(shared: Store) -> None:
    cid = _currency(shared, "Goods currency")
    sku = unique("sku")
    got = data(shared, GOODS, "CmdAdd", {"sku": sku, "name": "Apple", "price": "12.5", "curr_id": str(cid)})
    gid = got["detail"]["id"]
    assert got["detail"]["row"] == {"id": gid, "sku": sku, "name": "Apple", "price": 12.5, "curr_id": cid}
    assert isinstance(got["detail"]["row"]["price"], float)
    found = data(shared, GOODS, "CmdGet", {"sku": sku})["detail"]
    assert found == {"found": True, "row": got["detail"]["row"]}
    assert data(shared, GOODS, "CmdGet", {"sku": unique("none")})["detail"] == {"found": False, "row": None}
    listed = data(shared, GOODS, "CmdList")["tables"]["goods"]
    assert got["detail"]["row"] in listed


def test_goods_price_default_and_refusals(shared: Store) -> None:
    sku = unique("sku")
    row = data(shared, GOODS, "CmdAdd", {"sku": sku, "name": "Pear"})["detail"]["row"]
    assert row["price"] == 0.0
    assert row["curr_id"] is None
    message = refusal(shared, GOODS, "CmdAdd", {"sku": sku, "name": "Pear again"})
    assert message == f"The goods [{sku}] are in the store already: id {row['id']}."
    assert (
        refusal(shared, GOODS, "CmdAdd", {"sku": unique("s"), "name": "X", "curr_id": 987654})
        == "No currency with id 987654 - see MELBIS_AGENT_CURRENCY CmdList."
    )


def test_import_goods_adds_and_updates_by_sku(shared: Store) -> None:
    old = unique("old")
    old_id = data(shared, GOODS, "CmdAdd", {"sku": old, "name": "Old"})["detail"]["id"]
    new = unique("new")
    rows = [
        {"ref": "r1", "sku": new, "name": "New", "price": 3},
        {"ref": "r2", "sku": old, "name": "Renamed"},
    ]
    got = data(shared, "MELBIS_AGENT_IMPORT_GOODS", "CmdAdd", {"goods": rows})
    table = got["tables"]["goods"]
    assert [r["ref"] for r in table] == ["r1", "r2"]
    assert table[1]["id"] == old_id
    assert got["message"] == "2 goods imported: 1 added, 1 updated"
    assert data(shared, GOODS, "CmdGet", {"sku": old})["detail"]["row"]["name"] == "Renamed"
    assert data(shared, GOODS, "CmdGet", {"sku": new})["detail"]["row"]["id"] == table[0]["id"]


def test_import_goods_refuses_a_bad_row_and_imports_none(shared: Store) -> None:
    sku = unique("none")
    message = refusal(
        shared,
        "MELBIS_AGENT_IMPORT_GOODS",
        "CmdAdd",
        {"goods": [{"sku": sku, "name": "A"}, {"sku": unique("x")}]},
    )
    assert message == "Row 2 of goods has no name. Nothing was imported."
    assert data(shared, GOODS, "CmdGet", {"sku": sku})["detail"]["found"] is False


def test_order_add(shared: Store) -> None:
    got = data(shared, "MELBIS_AGENT_ORDER", "CmdAdd", {"contract": unique("C"), "qty": "3"})
    assert isinstance(got["detail"]["id"], int)


def test_order_lock_refuses_a_second_call_on_the_same_contract(shared: Store) -> None:
    contract = unique("C")
    barrier = threading.Barrier(2)
    answers: list[dict[str, Any]] = []

    def call() -> None:
        barrier.wait()
        answers.append(shared.call("MELBIS_AGENT_ORDER", "CmdAdd", {"contract": contract}).json()["data"])

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = sorted(a["result"] for a in answers)
    assert results == [False, True]
    refused = next(a for a in answers if not a["result"])
    assert refused["message"] == f"Sales document {contract} is currently being processed"
    # other contracts are not held up by it
    assert data(shared, "MELBIS_AGENT_ORDER", "CmdAdd", {"contract": contract})["result"] is True


def test_echo_gives_the_fields_as_received_without_nulls(shared: Store) -> None:
    params = {"a": 1, "b": "two", "c": [1, {"d": None}], "gone": None, "store.price": 1.5}
    got = data(shared, TEST, "CmdEcho", params)
    assert got["detail"] == {"a": 1, "b": "two", "c": [1, {"d": None}], "store.price": 1.5}
    assert got["tables"] == {}
    assert got["files"] == []


def test_fail_crash_noresult(shared: Store) -> None:
    assert refusal(shared, TEST, "CmdFail") == "CmdFail refuses, as it always does."
    assert (
        crash(shared, TEST, "CmdCrash")
        == "MELBIS_AGENT_TEST\\CmdCrash failed: CmdCrash broke off, as it always does"
    )
    assert crash(shared, TEST, "CmdNoResult") == "MELBIS_AGENT_TEST\\CmdNoResult answered without result"


def test_sleep(shared: Store) -> None:
    doc = envelope(shared, TEST, "CmdSleep", {"ms": 120})
    assert doc["data"]["detail"] == {"slept": 120}
    assert doc["unit_ms"] >= 120
    assert doc["ms"] >= doc["unit_ms"]
    assert refusal(shared, TEST, "CmdSleep", {"ms": -1}) == "ms is from 0 to 600000."


def test_table_rows_of_width(shared: Store) -> None:
    rows = data(shared, TEST, "CmdTable", {"rows": 5, "width": 3})["tables"]["rows"]
    assert rows == [{"n": n, "text": "abc"} for n in range(1, 6)]
    default = data(shared, TEST, "CmdTable", {"rows": 1})["tables"]["rows"]
    assert len(default[0]["text"]) == 20
    assert data(shared, TEST, "CmdTable", {"rows": 0})["tables"] == {"rows": []}


def test_big_table_streams_whole(shared: Store) -> None:
    resp = requests.post(
        f"{shared.url}/tool_run",
        json={"unit": TEST, "command": "CmdTable", "params": {"rows": 200_000, "width": 20}},
        headers={"Authorization": f"Bearer {STORE_TOKEN}"},
        timeout=60,
    )
    rows = resp.json()["data"]["tables"]["rows"]
    assert len(rows) == 200_000
    assert rows[-1] == {"n": 200_000, "text": "abcdefghijklmnopqrst"}


def test_answer_keeps_the_five_keys_first(shared: Store) -> None:
    resp = shared.call(TEST, "CmdEcho", {"x": 1})
    keys = list(json.loads(resp.text)["data"])
    assert keys == ["result", "message", "detail", "tables", "files"]
    assert list(json.loads(resp.text)) == ["ok", "ms", "unit_ms", "data"]


def test_debug_adds_sql_beside_ms(shared: Store) -> None:
    doc = envelope(shared, CUR, "CmdList", debug=True)
    assert list(doc)[:4] == ["ok", "ms", "sql", "sql_ms"]
    assert doc["sql"] == 1
    assert isinstance(doc["sql_ms"], int)
    plain = envelope(shared, CUR, "CmdList")
    assert "sql" not in plain
    assert "sql_ms" not in plain


def test_a_refusal_of_the_engine_has_no_module_time(shared: Store) -> None:
    doc = envelope(shared, TEST, "CmdNope")
    assert "unit_ms" not in doc
    assert doc["data"] == {
        "result": False,
        "detail": {},
        "tables": {},
        "files": [],
        "message": doc["data"]["message"],
    }


def test_ops_record_every_command_run_and_nothing_else(shared: Store) -> None:
    before = len(shared.ops())
    marker = unique("m")
    data(shared, TEST, "CmdEcho", {"marker": marker})
    refusal(shared, TEST, "CmdFail")
    crash(shared, TEST, "CmdCrash")
    refusal(shared, TEST, "CmdEcho2")  # refused by the engine: no op
    refusal(shared, CUR, "CmdAdd", {"nmae": "x"})  # refused by the engine: no op
    no_unit = requests.post(
        f"{shared.url}/tool_run",
        json={"command": "CmdEcho"},
        headers={"Authorization": f"Bearer {STORE_TOKEN}"},
        timeout=10,
    ).json()["data"]
    assert no_unit["result"] is False  # no unit: no op
    ops = shared.ops()
    assert len(ops) == before + 3
    assert [(o["unit"], o["command"]) for o in ops[-3:]] == [
        (TEST, "CmdEcho"),
        (TEST, "CmdFail"),
        (TEST, "CmdCrash"),
    ]
    assert ops[-3]["params"] == {"marker": marker}
    assert ops[-3]["idempotency_key"] is None
    assert ops[-3]["time"] <= ops[-1]["time"]
    assert len(shared.ops()) == before + 3  # reading the ops adds none


def test_tool_list_declares_every_tool(shared: Store) -> None:
    resp = requests.post(
        f"{shared.url}/tool_list", json={}, headers={"Authorization": f"Bearer {STORE_TOKEN}"}, timeout=10
    )
    doc = resp.json()
    assert doc["ok"] is True
    assert doc["data"]["result"] is True
    tools = {t["unit"]: t for t in doc["data"]["tools"]}
    assert set(tools) == {
        CUR,
        GOODS,
        "MELBIS_AGENT_IMPORT_GOODS",
        "MELBIS_AGENT_IMPORT_FILES",
        "MELBIS_AGENT_ORDER",
        TEST,
    }
    cur = tools[CUR]
    assert cur["module"] == "melbis_agent_currency.php"
    assert [c["name"] for c in cur["commands"]] == ["CmdList", "CmdAdd", "CmdUpdate", "CmdRemove", "CmdPos"]
    add = cur["commands"][1]
    assert add["granted"] is True
    assert [(p["name"], p["type"], p["required"], p["default"]) for p in add["params"]] == [
        ("skey", "str", False, ""),
        ("name", "str", True, ""),
        ("multiplex", "float", False, "1"),
        ("division", "bool", False, "false"),
        ("pos", "int", False, ""),
    ]
    assert set(add["params"][0]) == {"name", "type", "required", "default", "descr"}
    assert set(add) == {"name", "descr", "granted", "params"}
    echo = next(c for c in tools[TEST]["commands"] if c["name"] == "CmdEcho")
    assert echo["any_fields"] is True
    files = tools["MELBIS_AGENT_IMPORT_FILES"]["commands"][0]["params"]
    assert [(p["name"], p["type"], p["required"]) for p in files] == [
        ("files", "files", True),
        ("profile", "str", False),
    ]
    assert [(p["name"], p["type"]) for p in tools["MELBIS_AGENT_IMPORT_GOODS"]["commands"][0]["params"]] == [
        ("goods", "jsonl")
    ]


def test_tool_list_of_one_unit_and_of_none(shared: Store) -> None:
    headers = {"Authorization": f"Bearer {STORE_TOKEN}"}
    one = requests.post(
        f"{shared.url}/tool_list", json={"unit": "melbis_agent_order"}, headers=headers, timeout=10
    ).json()["data"]
    assert [t["unit"] for t in one["tools"]] == ["MELBIS_AGENT_ORDER"]
    none = requests.post(f"{shared.url}/tool_list", json={"unit": "NOPE"}, headers=headers, timeout=10).json()
    assert none["ok"] is True
    assert none["data"] == {
        "result": False,
        "message": "ACCESS_DENIED: no such tool: NOPE",
        "detail": {},
        "tables": {},
        "files": [],
        "tools": [],
    }
    empty = requests.post(f"{shared.url}/tool_list", data=b"", headers=headers, timeout=10).json()
    assert len(empty["data"]["tools"]) == 6


def test_concurrent_writers_lose_no_row(shared: Store) -> None:
    prefix = unique("many")
    barrier = threading.Barrier(8)
    failures: list[str] = []

    def writer(w: int) -> None:
        with requests.Session() as session:
            barrier.wait()
            for n in range(20):
                body = {
                    "unit": GOODS,
                    "command": "CmdAdd",
                    "params": {"sku": f"{prefix}-{w}-{n}", "name": "M"},
                }
                doc = session.post(
                    f"{shared.url}/tool_run", json=body, headers={"Authorization": f"Bearer {STORE_TOKEN}"},
                    timeout=30,
                ).json()
                if doc["data"]["result"] is not True:
                    failures.append(doc["data"]["message"])

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    skus = {
        r["sku"] for r in data(shared, GOODS, "CmdList")["tables"]["goods"] if r["sku"].startswith(prefix)
    }
    assert len(skus) == 160
