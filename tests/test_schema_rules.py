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
from helpers import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pooler.errors import PoolerError
from pooler.mcp.schemas import TOOLS
from pooler.pool import rules
from pooler.pool.compiler import compile_pool
from pooler.pool.documents import parse_text
from pooler.pool.loader import load_pool
from pooler.pool.model import MODES, RESERVED_NAMES, ForEach
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
    assert STEP["name"]["not"]["pattern"] == rules.RESERVED_PATTERN
    assert SCHEMA["properties"]["vars"]["propertyNames"]["not"]["pattern"] == rules.RESERVED_PATTERN
    assert set(rules.RESERVED) == RESERVED_NAMES
    text = SCHEMA["$defs"]["template_text"]["not"]["anyOf"]
    assert [t["pattern"] for t in text] == [rules.ENV_TEMPLATE_PATTERN, rules.UNCLOSED_PATTERN]
    assert for_each["file"]["$ref"] == STEP["key"]["$ref"] == "#/$defs/template_text"


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


def corpus() -> list[tuple[Path, Any]]:
    """Every pool file of the repository that reads as a document, with its value.  Read as pooler
    reads them: a file its reader refuses (an alias bomb, a duplicate key) is for the loader, not
    for the schema, and would cost a validator that walks every value all its expansion."""
    found = []
    for path in sorted([*(ROOT / "tests" / "pools").rglob("*"), *(ROOT / "pools").rglob("*")]):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        try:
            found.append((path, parse_text(path.read_text(encoding="utf-8"), str(path)).value))
        except (PoolerError, UnicodeDecodeError, RecursionError):
            continue
    return found


def documents() -> list[Any]:
    return [value for _, value in corpus()]


FULL = Draft202012Validator(SCHEMA)
QUICK = compile_schema(SCHEMA)


#: The pools of the corpus that pooler refuses for a rule JSON Schema cannot state (it depends on
#: another part of the pool or on another file), each named in the schema's description.  Every
#: other pool of the corpus gets one verdict from the schema and from pooler.
BEYOND_SCHEMA = {
    "bad-chunk-field-in-params.yaml": "a params field that for_each.field fills",
    "bad-duplicate-keys.yaml": "two calls with one key",
    "bad-for-each-step-later.yaml": "for_each.step naming a step that does not come before",
    "bad-params-source-list.yaml": "what pool_source and params_source files hold",
    "bad-params-source-missing.yaml": "what pool_source and params_source files hold",
    "bad-probe-template.yaml": "a ${name} that names no declared variable",
    "bad-ref-later.yaml": "a reference (@name.field) that names no earlier step",
    "bad-ref-no-field.yaml": "a reference (@name.field) that names no earlier step",
    "bad-ref-self.yaml": "a reference (@name.field) that names no earlier step",
    "bad-ref-unknown.yaml": "a reference (@name.field) that names no earlier step",
    "bad-row-in-chunk.yaml": "a ${row...} in params of a step without for_each",
    "bad-row-outside.yaml": "a ${row...} in params of a step without for_each",
    "bad-source-cut-off.yaml": "what pool_source and params_source files hold",
    "bad-source-empty-list.yaml": "what pool_source and params_source files hold",
    "bad-source-missing.yaml": "what pool_source and params_source files hold",
    "bad-source-not-utf8.yaml": "what pool_source and params_source files hold",
    "bad-source-object.yaml": "what pool_source and params_source files hold",
    "bad-source-step-key.yaml": "what pool_source and params_source files hold",
    "bad-source-zero-byte.yaml": "what pool_source and params_source files hold",
    "bad-twin-names.yaml": "two steps whose names are equal but for case",
    "bad-var-undeclared.yaml": "a ${name} that names no declared variable",
}


def pooler_accepts(path: Path) -> bool:
    """pooler's verdict on a pool file as ``pooler check`` gives it (data files by their header)."""
    try:
        compile_pool(load_pool(path, partial=True), read_data=False)
    except PoolerError:
        return False
    return True


@pytest.mark.parametrize(("path", "document"), corpus(), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_the_schema_and_pooler_give_one_verdict_on_every_pool_of_the_corpus(path: Path,
                                                                            document: Any) -> None:
    beyond = BEYOND_SCHEMA.get(path.name) if path.parent.name == "pools" else None
    if beyond is not None:
        assert beyond in SCHEMA["description"]
        assert (FULL.is_valid(document), pooler_accepts(path)) == (True, False)
        return
    assert FULL.is_valid(document) == pooler_accepts(path), FULL.best_match(FULL.iter_errors(document))


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
                             "retry", "for_each", "probe", "description", "files"])
for_each = st.fixed_dictionaries({}, optional={
    "file": pieces, "step": pieces, "table": pieces, "format": pieces, "chunk": st.integers(-1, 3),
    "field": pieces, "delimiter": pieces, "encoding": pieces, "other": scalars})
step = st.fixed_dictionaries({"unit": pieces, "command": pieces}, optional={
    "name": pieces, "params": st.dictionaries(pieces, values, max_size=3) | scalars, "into": pieces | scalars,
    "key": pieces | scalars, "debug": scalars, "for_each": for_each | scalars,
    "retry": st.dictionaries(st.sampled_from(["attempts", "backoff_ms", "on_in_doubt", "busy_for", "x"]),
                             scalars)
    | st.fixed_dictionaries({}, optional={"refusals": st.lists(pieces | scalars, max_size=2) | scalars}),
    "probe": st.dictionaries(st.sampled_from(["unit", "command", "params", "landed", "detail", "x"]),
                             pieces | scalars),
}) | st.dictionaries(step_keys, values, max_size=4)
pools = st.fixed_dictionaries({}, optional={
    "pool": st.lists(step, max_size=3) | scalars, "pool_source": pieces | scalars,
    "mode": pieces | scalars, "max_concurrency": st.integers(-1, 17) | scalars,
    "serialize_on": pieces | scalars, "stop_on_error": scalars, "include_results": scalars,
    "vars": st.dictionaries(pieces, values | st.fixed_dictionaries({}, optional={
        "default": values, "env": pieces, "secret": scalars, "description": scalars}), max_size=2) | scalars,
    "description": scalars, "other": scalars,
    "retry": st.dictionaries(st.sampled_from(["busy_for", "attempts"]), scalars) | scalars})


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=pools | values)
def test_the_fast_path_agrees_with_jsonschema_on_generated_pools(document: Any) -> None:
    assert QUICK is not None
    assert QUICK(document) == FULL.is_valid(document)


def test_every_pool_file_in_the_repository_was_seen() -> None:
    assert len(documents()) > 50
    assert Path(ROOT / "pools" / "demo.yaml").is_file()
