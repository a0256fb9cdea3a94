"""The published JSON Schema and the rules pooler applies say the same thing, and the fast schema
check (pooler/pool/schema_gate.py) agrees with jsonschema on every pool in the repository and on
generated ones."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pooler.mcp.schemas import TOOLS
from pooler.pool import rules
from pooler.pool.model import MODES, ForEach
from pooler.pool.rows import FORMATS
from pooler.pool.schema_gate import compile_schema
from pooler.pool.schema_problems import pool_schema

EXAMPLES = max(200, int(os.environ.get("POOLER_FUZZ_EXAMPLES", "100")))
SCHEMA = json.loads((ROOT / "schemas" / "pool.schema.json").read_text(encoding="utf-8"))
STEP = SCHEMA["$defs"]["step"]["properties"]


def test_the_schema_states_the_rules_as_pooler_applies_them() -> None:
    assert STEP["into"]["pattern"] == rules.INTO_PATTERN
    assert STEP["into"]["maxLength"] == rules.MAX_INTO
    assert STEP["name"]["pattern"] == rules.NAME_PATTERN
    assert SCHEMA["properties"]["vars"]["propertyNames"]["pattern"] == rules.VARIABLE_PATTERN
    assert SCHEMA["$defs"]["variable_declaration"]["properties"]["env"]["pattern"] == rules.VARIABLE_PATTERN
    assert SCHEMA["properties"]["serialize_on"]["pattern"] == rules.DOTTED_PATTERN
    assert SCHEMA["properties"]["max_concurrency"]["maximum"] == rules.MAX_CONCURRENCY
    assert SCHEMA["properties"]["mode"]["enum"] == list(MODES)
    for_each = SCHEMA["$defs"]["for_each"]["properties"]
    assert for_each["format"]["enum"] == list(FORMATS)
    assert {f.name for f in fields(ForEach)} == set(for_each)
    assert pool_schema() == SCHEMA


def test_the_mcp_tools_state_the_same_into_and_name() -> None:
    pool_tool = next(t for t in TOOLS if t.name == "tool_pool")
    step: dict[str, Any] = pool_tool.input_schema["properties"]["pool"]["items"]
    assert step["properties"]["into"]["pattern"] == rules.INTO_PATTERN
    assert step["properties"]["into"]["maxLength"] == rules.MAX_INTO
    assert step["properties"]["name"]["pattern"] == rules.NAME_PATTERN


INTO_VALIDATOR = Draft202012Validator({"type": "string", "pattern": rules.INTO_PATTERN,
                                       "maxLength": rules.MAX_INTO})


@settings(max_examples=EXAMPLES, deadline=None)
@given(into=st.text(max_size=70) | st.sampled_from(["photos", "a-b_2", "rates+eur", "a.b", "../x", "a b",
                                                    "c:x", "x" * 64, "x" * 65, "", "Ž"]))
def test_the_schema_and_the_into_rule_accept_the_same_names(into: str) -> None:
    if into.endswith("\n"):
        # A JSON Schema "$" matches before a final line end; the rule is the stricter one.
        assert rules.into_problem(into) is not None
        return
    assert INTO_VALIDATOR.is_valid(into) == (rules.into_problem(into) is None)
    assert (rules.into_problem(into) is None) == (rules.into_problem(into, in_pool=True) is None)


# The fast schema path against jsonschema


def documents() -> list[Any]:
    found = []
    for path in sorted([*(ROOT / "tests" / "pools").rglob("*"), *(ROOT / "pools").rglob("*")]):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        try:
            found.append(yaml.safe_load(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError, RecursionError):
            continue  # the broken files are for the loader, not for the schema
    return found


FULL = Draft202012Validator(SCHEMA)
QUICK = compile_schema(SCHEMA)


def test_the_fast_path_compiles_the_schema() -> None:
    assert QUICK is not None


@pytest.mark.parametrize("document", documents())
def test_the_fast_path_agrees_with_jsonschema_on_every_pool_in_the_repository(document: Any) -> None:
    assert QUICK is not None
    assert QUICK(document) == FULL.is_valid(document)


scalars = st.none() | st.booleans() | st.integers(-3, 20) | st.floats(allow_nan=False, allow_infinity=False,
                                                                      width=16) | st.text(max_size=6)
pieces = st.sampled_from(["EUR", "a.b", "a+b", "", "x", "${v}", "@a.b", "csv", "json", ";", "latin-1",
                          "sequential", "parallel", "SHOP_TOKEN", "1a"])
values = st.recursive(scalars | pieces, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(pieces, inner, max_size=3), max_leaves=8)
step_keys = st.sampled_from(["name", "unit", "command", "params", "params_source", "debug", "into", "key",
                             "retry", "for_each", "description", "files"])
for_each = st.fixed_dictionaries({}, optional={
    "file": pieces, "step": pieces, "table": pieces, "format": pieces, "chunk": st.integers(-1, 3),
    "field": pieces, "delimiter": pieces, "encoding": pieces, "other": scalars})
step = st.fixed_dictionaries({"unit": pieces, "command": pieces}, optional={
    "name": pieces, "params": st.dictionaries(pieces, values, max_size=3) | scalars, "into": pieces | scalars,
    "key": pieces | scalars, "debug": scalars, "for_each": for_each | scalars,
    "retry": st.dictionaries(st.sampled_from(["attempts", "backoff_ms", "on_in_doubt", "x"]), scalars),
}) | st.dictionaries(step_keys, values, max_size=4)
pools = st.fixed_dictionaries({}, optional={
    "pool": st.lists(step, max_size=3) | scalars, "pool_source": pieces | scalars,
    "mode": pieces | scalars, "max_concurrency": st.integers(-1, 17) | scalars,
    "serialize_on": pieces | scalars, "stop_on_error": scalars, "include_results": scalars,
    "vars": st.dictionaries(pieces, values | st.fixed_dictionaries({}, optional={
        "default": values, "env": pieces, "secret": scalars, "description": scalars}), max_size=2) | scalars,
    "description": scalars, "other": scalars})


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=pools | values)
def test_the_fast_path_agrees_with_jsonschema_on_generated_pools(document: Any) -> None:
    assert QUICK is not None
    assert QUICK(document) == FULL.is_valid(document)


def test_every_pool_file_in_the_repository_was_seen() -> None:
    assert len(documents()) > 50
    assert Path(ROOT / "pools" / "demo.yaml").is_file()
