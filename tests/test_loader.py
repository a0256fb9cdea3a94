"""Loading pool files: the seed's shapes, YAML and JSON alike, positions, limits, the schema."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pickle
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from pooler.errors import CheckFailed, InputError, PoolerError
from pooler.pool.checks import check_against, check_pool
from pooler.pool.loader import load_pool, load_pool_value
from pooler.pool.model import ForEach, Options, Pool, Pos, Retry, Step, Variable
from pooler.pool.schema_problems import pool_schema
from pooler.pool.variables import resolve_variables

POOLS = ROOT / "tests" / "pools"
SCHEMA = ROOT / "schemas" / "pool.schema.json"
EXAMPLES = int(os.environ.get("POOLER_FUZZ_EXAMPLES", "200"))

SEED_STEPS = [
    {"name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
     "params": {"skey": "EUR", "name": "Euro", "multiplex": 44.2}},
    {"unit": "MELBIS_AGENT_CURRENCY", "command": "CmdPos",
     "params": {"type": "POS", "data": [{"id": "@cur.id"}]}},
]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def step_fields(step: Step) -> dict[str, Any]:
    """A step as plain values, without where it was read from."""
    out = asdict(step)
    out.pop("source")
    out.pop("path")
    return out


def test_the_seeds_pool_loads_unchanged() -> None:
    pool = load_pool(POOLS / "good-seed.json")
    assert [(s.num, s.name, s.unit, s.command) for s in pool.steps] == [
        (1, "cur", "MELBIS_AGENT_CURRENCY", "CmdAdd"), (2, "", "MELBIS_AGENT_CURRENCY", "CmdPos")]
    assert [s.params for s in pool.steps] == [s["params"] for s in SEED_STEPS]
    assert pool.options == Options()
    assert pool.options_set == frozenset()
    assert pool.steps[1].path == ("pool", 1)
    assert pool.steps[1].source is pool.source
    assert check_pool(pool) == []


def test_the_seeds_pool_source_loads_relative_to_the_pool_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    pool = load_pool("tests/pools/good-seed-source.json")
    assert [s.params for s in pool.steps] == [s["params"] for s in SEED_STEPS]
    first = pool.steps[0]
    assert first.path == (0,)
    assert first.source is not None
    assert first.source.file == "tests/pools/data/steps.json"
    assert first.source.pos(first.path) == Pos(2, 3)
    assert first.problem("here", "params", "name").headline() == "tests/pools/data/steps.json:3:38: here"


def test_yaml_and_json_versions_load_to_the_same_pool() -> None:
    from_yaml = load_pool(POOLS / "good-full.yaml")
    from_json = load_pool(POOLS / "good-full.json")
    assert [step_fields(s) for s in from_yaml.steps] == [step_fields(s) for s in from_json.steps]
    assert from_yaml.options == from_json.options == Options(
        mode="parallel", max_concurrency=8, serialize_on="contract", stop_on_error=False,
        include_results=False)
    assert from_yaml.options_set == from_json.options_set == frozenset(
        {"mode", "max_concurrency", "serialize_on", "stop_on_error", "include_results"})
    assert from_yaml.variables == from_json.variables
    assert from_yaml.description == from_json.description == "Import goods, then report them"


def test_the_model_is_built_from_every_field() -> None:
    pool = load_pool(POOLS / "good-full.yaml")
    cur, goods, chunked, listing, echo = pool.steps
    assert cur.retry == Retry(attempts=3, backoff_ms=100, on_in_doubt=True)
    assert cur.key == "currency-${currency}"
    assert cur.description == "the currency the goods are priced in"
    assert cur.params == {"skey": "${currency}", "name": "Currency ${currency}", "multiplex": "${rate}",
                          "division": False}
    assert goods.for_each == ForEach(file="data/goods.csv")
    assert chunked.for_each == ForEach(file="data/goods.csv", chunk=500, field="goods")
    assert (listing.into, listing.debug, listing.retry) == ("goods_report", True, None)
    assert echo.for_each == ForEach(step="list", table="goods", format="jsonl")
    assert echo.params == {"mail": "@@shop.example", "price": "$${not a template}", "row": "${row}"}
    assert pool.variables == {
        "currency": Variable("currency", has_default=True, default="EUR"),
        "rate": Variable("rate", description="the rate against the base currency", has_default=True,
                         default=44.2),
        "token": Variable("token", has_default=True, default="none", env="POOLER_TEST_SHOP_TOKEN",
                          secret=True),
    }


def test_a_bare_null_declares_a_variable_without_a_default(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "vars:\n  token:\n  zero: 0\npool: [{unit: U, command: C}]\n")
    variables = load_pool(path).variables
    assert variables["token"] == Variable("token")
    assert variables["zero"] == Variable("zero", has_default=True, default=0)


def test_empty_params_and_vars_are_none(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "vars:\npool:\n  - unit: U\n    command: C\n    params:\n")
    pool = load_pool(path)
    assert pool.variables == {}
    assert pool.steps[0].params == {}


def test_positions_of_values_and_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "pool:\n  - unit: U\n    command: C\n    params:\n      a: [1, 2]\n")
    source = load_pool(path).source
    assert source is not None
    assert source.positions[("pool", 0, "unit")] == Pos(2, 11)
    assert source.positions[("pool", 0, "unit", "<key>")] == Pos(2, 5)
    assert source.positions[("pool", 0, "params", "a", 1)] == Pos(5, 14)
    assert source.lines[4] == "      a: [1, 2]"


def test_json_positions_come_from_the_same_text(tmp_path: Path) -> None:
    text = '{"pool": [\n  {"unit": "U",\n   "command": "C", "params": {"n": 1e5}}]}'
    path = write(tmp_path, "p.json", text)
    pool = load_pool(path)
    assert pool.steps[0].params == {"n": 100000.0}
    assert pool.source is not None
    assert pool.source.pos(("pool", 0, "command")) == Pos(3, 15)
    assert pool.source.pos(("pool", 0, "command", "<key>")) == Pos(3, 4)


def test_yaml_reads_scalars_as_json_does(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", (
        "pool:\n  - unit: U\n    command: C\n    params:\n"
        "      exp: 1e5\n      yes_word: yes\n      no_word: NO\n      date: 2024-01-01\n"
        "      hex: 0x1F\n      nothing: ~\n      quoted: '3'\n      tagged: !!str 12\n"
        "      flag: true\n      neg: -2.5\n      inf_text: 'inf'\n      number_key: {200: ok}\n"
    ))
    assert load_pool(path).steps[0].params == {
        "exp": 100000.0, "yes_word": "yes", "no_word": "NO", "date": "2024-01-01", "hex": 31,
        "nothing": None, "quoted": "3", "tagged": "12", "flag": True, "neg": -2.5, "inf_text": "inf",
        "number_key": {"200": "ok"},
    }


@pytest.mark.parametrize(("text", "value"), [
    ("!!int '12'", 12), ("!!float 1", 1.0), ("!!null ''", None), ("!!bool 'true'", True),
    ("!!str 1e5", "1e5"),
])
def test_explicit_tags_read_as_json_would(tmp_path: Path, text: str, value: Any) -> None:
    path = write(tmp_path, "p.yaml", f"pool: [{{unit: U, command: C, params: {{v: {text}}}}}]\n")
    found = load_pool(path).steps[0].params["v"]
    assert found == value
    assert type(found) is type(value)


@pytest.mark.parametrize(("text", "message"), [
    ("!!int ''", "!!int '' is not a whole number - fix the value or drop the tag."),
    ("!!bool yes", "!!bool 'yes' is not true or false - fix the value or drop the tag."),
    ("!!set {a: 1}", ("the tag !!set is not supported - a pool file holds JSON values only: text, "
                      "numbers, true/false, null, lists and mappings.")),
])
def test_explicit_tags_that_do_not_fit(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "p.yaml", f"pool: [{{unit: U, command: C, params: {{v: {text}}}}}]\n")
    with pytest.raises(InputError) as refused:
        load_pool(path)
    assert refused.value.message == message


def test_merge_keys_share_params() -> None:
    pool = load_pool(POOLS / "good-merge.yaml")
    assert pool.steps[0].params == {"contract": "${contract}", "qty": 1}
    assert pool.steps[1].params == {"qty": 2, "contract": "${contract}"}


def test_a_yaml_flow_mapping_is_not_taken_for_json(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "{pool: [{unit: U, command: C, params: {a: yes}}]}\n")
    assert load_pool(path).steps[0].params == {"a": "yes"}


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"pool": SEED_STEPS}).encode())
    assert len(load_pool(path).steps) == 2


def test_params_source_is_read_at_load_time_relative_to_the_pool(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "fields.json", '{"name": "Euro", "multiplex": 1e1}')
    text = "pool:\n  - unit: U\n    command: C\n    params_source: sub/fields.json\n"
    path = write(tmp_path, "p.yaml", text)
    step = load_pool(path).steps[0]
    assert step.params == {"name": "Euro", "multiplex": 10.0}
    # A problem about a field points at the params_source line.
    assert step.problem("bad field", "params", "name").headline() == f"{path}:4:20: bad field"


def test_params_source_in_a_json_pool_points_at_its_line(tmp_path: Path) -> None:
    write(tmp_path, "fields.json", '{"name": "Euro"}')
    text = '{"pool": [\n  {"unit": "U", "command": "C",\n   "params_source": "fields.json"}]}'
    path = write(tmp_path, "p.json", text)
    step = load_pool(path).steps[0]
    assert step.problem("bad field", "params", "name").headline() == f"{path}:3:21: bad field"


def test_a_copied_pool_keeps_its_positions(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "pool:\n  - unit: U\n    command: C\n    params: {a: 1}\n")
    pool = load_pool(path)
    copied = copy.deepcopy(pool)
    assert copied.source is not None
    assert copied.source.positions[("pool", 0, "params", "a")] == Pos(4, 17)
    assert pickle.loads(pickle.dumps(pool)).steps[0].problem("x", "params").line == 4


def test_params_source_of_a_pool_source_step_is_relative_to_its_own_file(tmp_path: Path) -> None:
    (tmp_path / "steps").mkdir()
    write(tmp_path / "steps", "fields.json", '{"name": "Euro"}')
    write(tmp_path / "steps", "list.json", '[{"unit": "U", "command": "C", "params_source": "fields.json"}]')
    path = write(tmp_path, "p.yaml", "pool_source: steps/list.json\n")
    assert load_pool(path).steps[0].params == {"name": "Euro"}


def test_load_pool_value_takes_the_seeds_arguments(tmp_path: Path) -> None:
    pool = load_pool_value({"pool": SEED_STEPS}, file="<tool_pool>", base=tmp_path)
    assert [s.params for s in pool.steps] == [s["params"] for s in SEED_STEPS]
    write(tmp_path, "steps.json", json.dumps(SEED_STEPS))
    from_file = load_pool_value({"pool_source": "steps.json"}, base=tmp_path)
    assert [s.name for s in from_file.steps] == ["cur", ""]


def test_load_pool_value_reports_without_positions(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed) as failed:
        load_pool_value({"pool": [{"unit": "U"}, {"unit": "U", "command": "C", "parms": {}}]},
                        file="<tool_pool>", base=tmp_path)
    assert [(p.headline(), p.step, p.path) for p in failed.value.problems()] == [
        (("<tool_pool>: Step 1 needs unit and command - command is missing; `pooler tools` lists the "
          "store's tools and their commands."), 1, "pool[0]"),
        ("<tool_pool>: Unknown key [parms] in step 2 - did you mean params?", 2, "pool[1].parms.<key>"),
    ]


def test_an_unknown_key_with_no_close_match_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed) as failed:
        load_pool_value({"pool": [{"unit": "U", "command": "C", "zzz": 1}]}, base=tmp_path)
    assert failed.value.message == ("Unknown key [zzz] in step 1 - step 1 takes: name, unit, command, "
                                    "params, params_source, debug, into, key, retry, tolerate, rate, "
                                    "for_each, probe, compare, chunk_row, description.")


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", json.dumps({"pool": SEED_STEPS}))
    with pytest.raises(InputError) as refused:
        load_pool(path, max_bytes=100)
    assert refused.value.message == f"{path} is larger than 100 bytes - split it into smaller files."


def test_a_missing_pool_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as refused:
        load_pool(tmp_path / "none.yaml")
    assert refused.value.message == f"No such file: {tmp_path / 'none.yaml'}"


def test_a_file_name_with_a_zero_byte(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed) as refused:
        load_pool_value({"pool_source": "a\x00b.json"}, base=tmp_path)
    assert refused.value.message == f"No such file: {tmp_path}/a\\0b.json - a file name holds no zero byte."


def test_a_bigger_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    path = write(tmp_path, "bomb.yaml", "\n".join(lines) + "\npool: [{unit: U, command: C}]\n")
    with pytest.raises(InputError) as refused:
        load_pool(path)  # 10**12 values if expanded: refused from the node graph alone
    assert "expands to more than 1,000,000 values" in refused.value.message


def test_a_10000_step_pool_loads_and_checks(tmp_path: Path) -> None:
    steps = [
        f"  - name: s{i}\n    unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n    key: k{i}\n"
        f"    params: {{n: {i}, who: \"${{who}}\", ref: \"@s{max(i - 1, 0)}.n\"}}\n"
        for i in range(10_000)
    ]
    path = write(tmp_path, "big.yaml", "vars:\n  who: me\npool:\n" + "".join(steps))
    began = time.perf_counter()
    pool = load_pool(path)
    problems = check_pool(pool, {"who": "me"})
    took = time.perf_counter() - began
    print(f"load + check of 10,000 steps: {took:.2f} s")
    assert len(pool.steps) == 10_000
    assert [p.message for p in problems] == [
        "@s0.n refers to its own step - a step's detail exists only after it ran; refer to an earlier step."]


def _properties_without_description(schema: Any, where: str) -> list[str]:
    missing: list[str] = []
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            if not (isinstance(sub, dict) and sub.get("description")):
                missing.append(f"{where}.properties.{name}")
        for name, sub in schema.get("$defs", {}).items():
            if not (isinstance(sub, dict) and sub.get("description")):
                missing.append(f"{where}.$defs.{name}")
        for key, sub in schema.items():
            missing.extend(_properties_without_description(sub, f"{where}.{key}"))
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            missing.extend(_properties_without_description(sub, f"{where}[{i}]"))
    return missing


def test_every_property_of_the_schema_has_a_description() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert _properties_without_description(schema, "$") == []
    assert schema["$id"] == "urn:pooler:schema:pool-file:1"
    assert schema["title"] == "pooler pool file"
    assert len(schema["examples"]) == 2
    Draft202012Validator.check_schema(schema)
    assert pool_schema() == schema


def test_the_schemas_examples_and_the_good_pools_are_valid() -> None:
    schema = pool_schema()
    validator = Draft202012Validator(schema)
    for example in schema["examples"]:
        assert list(validator.iter_errors(example)) == []
    for path in POOLS.glob("good-*"):
        pool = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            assert list(validator.iter_errors(json.loads(pool))) == [], path


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
pool_like = st.fixed_dictionaries(
    {"pool": st.lists(st.dictionaries(
        st.sampled_from(["name", "unit", "command", "params", "key", "into", "retry", "for_each", "files",
                         "x"]),
        json_values, max_size=6), max_size=4)},
    optional={"mode": json_values, "vars": json_values, "max_concurrency": json_values,
              "pool_source": json_values},
)


def _outcome(text: str, suffix: str) -> Pool | PoolerError:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"p{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            return load_pool(path)
        except PoolerError as exc:
            return exc


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(), suffix=st.sampled_from([".yaml", ".json"]))
def test_any_text_gives_a_pool_or_a_pooler_error(text: str, suffix: str) -> None:
    result = _outcome(text.replace("\ud800", ""), suffix)
    assert isinstance(result, Pool | PoolerError)


FUZZ_TOOLS: list[dict[str, Any]] = [{"unit": "U", "commands": [
    {"name": "C", "granted": True, "params": [{"name": "n", "type": "int", "required": True},
                                              {"name": "rows", "type": "jsonl"},
                                              {"name": "ids", "type": "int/json"}]}]}]
YAML_BITS = ["pool:", "pool_source:", "vars:", "- ", "&a ", "*a", "&b ", "*b", "!!str ", "!!int ", "!!map ",
             "!x ", "{", "}", "[", "]", ", ", ": ", "? ", "<<: ", "\n", "  ", "\t", "#", "---\n", "...\n",
             "%YAML 1.2\n", '"', "'", "\\", "unit: U", "command: C", "params: ", "name: a", "1e5", ".nan",
             "~", "null", "yes", "|\n", ">\n", "@a.b", "${x}", "$${", "\x00", "\ufeff", "0x1F", "-1"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bits=st.lists(st.sampled_from(YAML_BITS), max_size=40), suffix=st.sampled_from([".yaml", ".json"]))
def test_any_yaml_like_text_gives_a_pool_or_a_pooler_error(bits: list[str], suffix: str) -> None:
    result = _outcome("".join(bits), suffix)
    assert isinstance(result, Pool | PoolerError)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=pool_like, as_json=st.booleans())
def test_any_pool_shaped_document_gives_a_pool_or_a_pooler_error(value: dict[str, Any],
                                                                 as_json: bool) -> None:
    text = json.dumps(value) if as_json else yaml.safe_dump(value, allow_unicode=True)
    result = _outcome(text, ".json" if as_json else ".yaml")
    assert isinstance(result, Pool | PoolerError)
    if isinstance(result, Pool):
        assert isinstance(check_pool(result), list)
        assert isinstance(check_against(result, FUZZ_TOOLS), list)
        with contextlib.suppress(PoolerError):
            resolve_variables(result, {}, None, {})
