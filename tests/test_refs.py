"""References ``@name.field``: the seed's rule, on their own and in runs against the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from poolkit import TEST, echo, make_pool, ops_of, run, step

from pooler.pool.paramplan import plan_params
from pooler.pool.references import Ref, RefMissing, RefUnavailable, find_refs, parse_ref


def resolve(params: Any, details: dict[str, Any], known: set[str]) -> Any:
    """What ``params`` become in a call: the run's own plan of them, filled with ``details`` (the
    earlier steps' details by lower-case name), no variables in scope."""
    return plan_params({"v": params}, known).fill({}, details)["v"]


DETAIL = {"id": 12, "price": 9.5, "ok": True, "none": None, "row": {"id": 5, "sku": "A-1"},
          "items": [{"id": 1}, {"id": 2, "tags": ["x", "y"]}], "by_num": {"1": {"id": 9}},
          "odd name": {"*": 3}}


def test_a_whole_string_reference_keeps_the_type() -> None:
    details = {"cur": DETAIL}
    known = {"cur"}
    assert resolve("@cur.id", details, known) == 12
    assert resolve("@cur.price", details, known) == 9.5
    assert resolve("@cur.ok", details, known) is True
    assert resolve("@cur.none", details, known) is None
    assert resolve("@cur.row", details, known) == {"id": 5, "sku": "A-1"}
    assert resolve("@cur.items", details, known) == DETAIL["items"]


def test_paths_go_deeper_and_into_lists_by_index() -> None:
    details = {"cur": DETAIL}
    known = {"cur"}
    assert resolve("@cur.row.sku", details, known) == "A-1"
    assert resolve("@cur.items.0.id", details, known) == 1
    assert resolve("@cur.items.1.tags.1", details, known) == "y"
    # A list a store sent as an object keyed "0", "1"...: the number is tried as a field name.
    assert resolve("@cur.by_num.1.id", details, known) == 9
    # Names jsonpath would read as syntax are plain names.
    assert resolve("@cur.odd name.*", details, known) == 3


def test_references_work_at_any_depth_lists_included() -> None:
    params: dict[str, Any] = {"type": "POS", "data": [{"id": "@cur.id", "pos": 1}, ["@CUR.row.id", 7]],
              "deep": {"a": {"b": "@Cur.items.1.id"}}, "plain": "text"}
    got = resolve(params, {"cur": DETAIL}, {"cur"})
    assert got == {"type": "POS", "data": [{"id": 12, "pos": 1}, [5, 7]], "deep": {"a": {"b": 2}},
                   "plain": "text"}
    # The params of the pool are never changed in place.
    assert params["data"][0]["id"] == "@cur.id"


def test_params_without_references_are_not_copied() -> None:
    params = {"a": [1, {"b": "c"}], "d": "e"}
    assert resolve(params, {"cur": DETAIL}, {"cur"}) is params


def test_words_of_data_go_as_they_are() -> None:
    details = {"cur": DETAIL}
    known = {"cur"}
    for word in ("@nobody.id", "@example.com", "user@cur.id", "@cur", "cur.id", "@", "@.id"):
        assert resolve(word, details, known) == word
    # A step that comes later is not known yet: its name is a word of data too.
    assert resolve("@later.id", details, known) == "@later.id"


def test_a_double_at_is_a_literal_at() -> None:
    assert resolve("@@cur.id", {"cur": DETAIL}, {"cur"}) == "@cur.id"
    assert resolve(["@@", "@@@x"], {}, set()) == ["@", "@@x"]
    assert parse_ref("@@cur.id") is None
    assert resolve({"a": ["@@b.c", "@d.e"], "f": 1}, {}, set()) == {"a": ["@b.c", "@d.e"], "f": 1}


def test_a_field_the_detail_lacks_is_refused_with_the_seed_text() -> None:
    for path in ("nope", "row.nope", "items.5.id", "items.x", "id.deeper"):
        with pytest.raises(RefMissing) as caught:
            resolve({"x": [f"@Cur.{path}"]}, {"cur": DETAIL}, {"cur"})
        assert caught.value.message.startswith(
            f"@Cur.{path} names a field the detail of that step does not have. ")


def test_a_known_step_without_detail_is_unavailable() -> None:
    with pytest.raises(RefUnavailable) as caught:
        resolve("@cur.id", {}, {"cur"})
    assert caught.value.message == ("@cur.id refers to step cur, which has not completed - run the pool "
                                    "again once that step succeeds.")


def test_find_refs_names_every_reference_and_where_it_stands() -> None:
    params = {"a": "@one.id", "b": [{"c": "@two.row.0"}], "d": "@@three.x", "e": "mail@x.com"}
    assert find_refs(params) == [Ref("one", "id", ("a",)), Ref("two", "row.0", ("b", 0, "c"))]
    # Of the steps known, only those named are waited for: the rest is data.
    assert plan_params(params, {"two", "four"}).steps() == {"two"}


def test_a_reference_is_filled_beside_a_template_and_neither_reads_the_others_value() -> None:
    raw = {"id": "@cur.id", "list": ["@cur.row", "keep"], "n": "${row.n}", "m": "${row.m}"}
    # A row's value that looks like a reference is data, and so is a detail's value like a template.
    scope = {"row": {"n": 3, "m": "@cur.id"}}
    detail = {**DETAIL, "row": "${row.n}"}
    assert plan_params(raw, {"cur"}).fill(scope, {"cur": detail}) == {
        "id": 12, "list": ["${row.n}", "keep"], "n": 3, "m": "@cur.id"}


# Against the store


def detail_of(answer: dict[str, Any], num: int) -> Any:
    return next(e for e in answer["steps"] if e["num"] == num)["detail"]


def test_the_seeds_currency_example(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [
        step("MELBIS_AGENT_CURRENCY", "CmdAdd", {"skey": "EUR", "name": "Euro", "multiplex": 44.2},
             name="cur"),
        step("MELBIS_AGENT_CURRENCY", "CmdPos", {"type": "POS", "data": [{"id": "@cur.id"}]}),
    ])
    answer = run(pool, store, tmp_path / "out")
    assert answer["result"] is True
    assert [(e["num"], e["name"], e["status"]) for e in answer["steps"]] == [(1, "cur", "completed"),
                                                                           (2, "", "completed")]
    new_id = detail_of(answer, 1)["id"]
    assert isinstance(new_id, int)
    pos = ops_of(store, "CmdPos")
    assert len(pos) == 1
    assert pos[0]["params"]["data"] == [{"id": new_id}]


def test_references_keep_types_through_the_store(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [
        echo({"n": 5, "f": 1.5, "obj": {"x": "y", "list": [1, 2]}, "lst": [{"id": 7}, {"id": 8}]},
             name="one"),
        echo({"n": "@one.n", "f": "@one.f", "obj": "@one.obj", "lst": "@one.lst",
              "deep": {"in": ["@ONE.obj.list.1", {"id": "@one.lst.1.id"}]},
              "data": ["@nobody.x", "me@one.n", "@@one.n", "@later.n"]}),
        echo({"n": 0}, name="later"),
    ])
    answer = run(pool, store, tmp_path / "out")
    assert answer["result"] is True
    assert detail_of(answer, 2) == {"n": 5, "f": 1.5, "obj": {"x": "y", "list": [1, 2]},
                                    "lst": [{"id": 7}, {"id": 8}], "deep": {"in": [2, {"id": 8}]},
                                    "data": ["@nobody.x", "me@one.n", "@one.n", "@later.n"]}


def test_a_missing_field_stops_the_pool_at_that_step_before_it_is_sent(store: Store,
                                                                       tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [
        echo({"a": 1}, name="one"),
        echo({"b": "@one.nope.deeper"}, name="two"),
        echo({"c": 3}, name="three"),
    ])
    answer = run(pool, store, tmp_path / "out")
    assert answer["result"] is False
    assert answer["steps"][-1] == {"num": 2, "name": "two", "unit": TEST, "command": "CmdEcho",
                                   "status": "failed", "key": None, "result": False,
                                   "message": "@one.nope.deeper names a field the detail of that step "
                                              "does not have. The detail has a."}
    assert len(answer["steps"]) == 2
    assert [op["params"] for op in ops_of(store)] == [{"a": 1}]
    assert (answer["status"], answer["failed"], answer["not_run"]) == ("partial", 1, 1)
