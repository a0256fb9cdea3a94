"""A step's params are walked once: fixed parts are shared by every call, only templates and
references are filled, and the escapes are taken off once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pooler.errors import InputError
from pooler.pool.loader import load_pool
from pooler.pool.marks import LazyPositions
from pooler.pool.paramplan import plan_params
from pooler.pool.references import RefMissing, RefUnavailable


def test_params_with_nothing_to_fill_are_the_same_object_every_call() -> None:
    params = {"a": 1, "b": {"c": [1, "x"]}, "d": "@nobody.id"}
    plan = plan_params(params, known=set())
    assert plan.dynamic is False
    assert plan.fill({}, {}) is params


def test_escapes_are_taken_off_once_and_not_read_again() -> None:
    plan = plan_params({"at": "@@one.id", "dollar": "$${x}", "both": "@@${x}"}, known={"one"})
    assert plan.fill({"x": "X"}, {"one": {"id": 1}}) == {"at": "@one.id", "dollar": "${x}", "both": "@X"}


def test_only_the_filled_parts_are_new_and_the_fixed_parts_are_shared() -> None:
    fixed = {"deep": [1, 2]}
    plan = plan_params({"fixed": fixed, "n": "${n}", "list": ["a", "@one.m.0", {"r": "${row.sku}"}],
                        "text": "n=${n}"}, known={"one"})
    assert plan.dynamic is True
    scope = {"n": 3, "row": {"sku": "A"}}
    first = plan.fill(scope, {"one": {"m": {"0": "zero"}}})
    assert first == {"fixed": {"deep": [1, 2]}, "n": 3, "list": ["a", "zero", {"r": "A"}], "text": "n=3"}
    assert first["fixed"] is fixed
    second = plan.fill({**scope, "n": 4}, {"one": {"m": ["first"]}})
    assert (second["n"], second["list"][1]) == (4, "first")


def test_a_value_from_a_row_or_a_detail_is_never_read_as_a_template_or_a_reference() -> None:
    plan = plan_params({"a": "${row.x}", "b": "@one.t"}, known={"one"})
    got = plan.fill({"row": {"x": "@one.t"}}, {"one": {"t": "${row.x}"}})
    assert got == {"a": "@one.t", "b": "${row.x}"}


def test_what_cannot_be_filled_is_told() -> None:
    plan = plan_params({"a": "@one.nope"}, known={"one"})
    with pytest.raises(RefMissing):
        plan.fill({}, {"one": {"id": 1}})
    with pytest.raises(RefUnavailable):
        plan.fill({}, {})
    with pytest.raises(InputError, match="names no variable"):
        plan_params({"a": "${v}"}, known=set()).fill({}, {})


def test_a_reference_is_told_at_its_place_only_when_it_misses(tmp_path: Path) -> None:
    pool_file = tmp_path / "pool.json"
    pool_file.write_text(
        '{"pool": [\n'
        '  {"name": "a", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"id": 1}},\n'
        '  {"name": "b", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"prev": "@a.idd"}}\n'
        "]}\n", encoding="utf-8")
    step = load_pool(pool_file).steps[1]
    positions = step.source.positions if step.source is not None else None
    assert isinstance(positions, LazyPositions)
    plan = plan_params(step.params, known={"a"}, step=step)
    assert plan.fill({}, {"a": {"idd": 7}}) == {"prev": 7}
    # Planned and filled, the file's positions are still unread: a run of thousands of steps whose
    # references all hit never walks the file again for them.
    assert positions._marks_of is not None
    with pytest.raises(RefMissing) as missed:
        plan.fill({}, {"a": {"id": 5}})
    assert missed.value.message == (f"{pool_file}:3:87: @a.idd names a field the detail of that step "
                                    "does not have. The detail has id - did you mean @a.id?")
