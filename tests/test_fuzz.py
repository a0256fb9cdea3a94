"""Property tests: the loader, the checks and the reference resolver never fail in an unplanned
way, and a pool that passes ``pooler check`` runs without tripping over the same checks.

Examples per property come from POOLER_FUZZ_EXAMPLES (100 by default; ``make fuzz`` sets 20000);
the property that runs whole pools against the store takes a quarter of them.
"""

from __future__ import annotations

import io
import json
import os
import re
import string
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import STORE_TOKEN, Store, environment, start_store
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from test_refs import resolve

from pooler.cli.commands.check import check_file
from pooler.cli.main import main
from pooler.client.http import ToolRunClient
from pooler.errors import PoolerError, Problem
from pooler.pool.against import check_against
from pooler.pool.checks import check_options, check_pool
from pooler.pool.loader import load_pool, load_pool_value
from pooler.pool.model import RESERVED_NAMES, Pool
from pooler.pool.references import find_refs
from pooler.pool.variables import substitute

EXAMPLES = int(os.environ.get("POOLER_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
#: A whole run against the store costs some 0.1 s: a quarter of the examples keeps it to seconds.
FUZZ_RUNS = settings(FUZZ, max_examples=max(10, EXAMPLES // 4))
TEST = "MELBIS_AGENT_TEST"

# Values

scalars = (st.none() | st.booleans() | st.integers(-(10**12), 10**12)
           | st.floats(allow_nan=False, allow_infinity=False, width=64) | st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

#: Words with no "$", "@" or "." in them: they are never read as templates, references or paths.
WORD = string.ascii_lowercase
words = st.text(WORD, min_size=1, max_size=6)
plain_text = st.text(st.characters(exclude_characters="$@", exclude_categories=["Cs"]), max_size=16)
plain_scalars = (st.booleans() | st.integers(-(10**9), 10**9)
                 | st.floats(allow_nan=False, allow_infinity=False, width=64) | plain_text)
plain_values = st.recursive(plain_scalars | st.none(), lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(words, inner, max_size=3), max_leaves=8)


def loaded_or_refused(load: Any, *args: Any, **kw: Any) -> Pool | None:
    """The pool, or None when a PoolerError refused it; anything else fails the test."""
    try:
        pool = load(*args, **kw)
    except PoolerError as exc:
        problems = exc.problems()
    else:
        assert isinstance(pool, Pool)
        event("loaded")
        return pool
    assert problems
    assert all(isinstance(p, Problem) and p.message for p in problems)
    event("refused")
    return None


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


# The loader

YAML_BITS = ["pool:", "pool_source:", "vars:", "mode:", "  - ", "    ", "unit: U", "command: C", "params:",
             "{", "}", "[", "]", ", ", ": ", "&a ", "*a", "<<: ", "!!str ", "!!python/object ", "- ", "'",
             '"', "#", "\t", "\n", "${x}", "@s.f", "key: k", "name: s", "for_each:", "file: x.csv",
             "retry: {attempts: 2}", "? ", "|", ">", "---", "...", "%YAML 1.1", "0x1F", ".inf", "~",
             "null", "true", "1e5", "\ufeff", "\x00", "é"]


@FUZZ
@given(text=st.text(max_size=300) | st.lists(st.sampled_from(YAML_BITS), max_size=40).map("".join),
       suffix=st.sampled_from([".yaml", ".json", ".yml", ".txt"]))
def test_any_text_loads_as_a_pool_or_is_refused_with_a_pooler_error(folder: Path, text: str,
                                                                    suffix: str) -> None:
    path = folder / f"pool{suffix}"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    pool = loaded_or_refused(load_pool, path)
    if pool is not None:
        assert all(isinstance(p, Problem) for p in check_pool(pool) + check_options(pool))


step_like = st.fixed_dictionaries({}, optional={
    "name": st.text(max_size=6) | json_values, "unit": st.sampled_from([TEST, "", "U"]) | json_values,
    "command": st.sampled_from(["CmdEcho", "C"]) | json_values, "params": json_values,
    "params_source": st.text(max_size=6) | json_values, "key": st.text(max_size=8) | json_values,
    "into": st.text(max_size=6) | json_values, "debug": json_values, "description": json_values,
    "retry": st.fixed_dictionaries({}, optional={"attempts": json_values, "backoff_ms": json_values,
                                                 "on_in_doubt": json_values}) | json_values,
    "for_each": st.fixed_dictionaries({}, optional={
        "file": st.text(max_size=6) | json_values, "step": st.text(max_size=6) | json_values,
        "table": json_values, "format": st.sampled_from(["csv", "json", "jsonl", "xml"]) | json_values,
        "chunk": json_values, "field": json_values}) | json_values,
    "files": json_values, "surprise": json_values})
#: Steps that get past the first refusals, so the schema and the meaning checks see more.
good_step_like = st.builds(lambda extra: {**extra, "unit": TEST, "command": "CmdEcho"}, step_like)
pool_like = st.fixed_dictionaries({}, optional={
    "pool": st.lists(good_step_like | step_like | json_values, max_size=4) | json_values,
    "pool_source": st.text(max_size=8) | json_values,
    "vars": st.dictionaries(st.text(max_size=6), json_values
                            | st.fixed_dictionaries({}, optional={"default": json_values, "env": json_values,
                                                                  "secret": json_values,
                                                                  "description": json_values}),
                            max_size=3) | json_values,
    "mode": st.sampled_from(["sequential", "parallel", "fast"]) | json_values,
    "max_concurrency": st.integers(-2, 20) | json_values, "serialize_on": st.text(max_size=6) | json_values,
    "stop_on_error": json_values, "include_results": json_values, "description": json_values,
    "extra": json_values})


#: Pools that pass the schema more often than not, so the meaning checks see many of them.
near_pools = st.fixed_dictionaries({"pool": st.lists(st.builds(
    lambda params, more: {"unit": TEST, "command": "CmdEcho", "params": params, **more},
    st.dictionaries(words, json_values | st.sampled_from(["@a.b", "@A.x.0", "@@a", "${v}", "${row.x}",
                                                           "${env.HOME}", "${nope}", "${v", "@a", "@z.q"]),
                    max_size=3),
    st.fixed_dictionaries({}, optional={
        "name": st.sampled_from(["a", "A", "b", "row", "a.b", ""]), "key": st.sampled_from(["k", "k-${v}",
                                                                                            "k-${row.id}"]),
        "into": st.sampled_from(["job", "../job", "a.b"]),
        "retry": st.fixed_dictionaries({}, optional={"attempts": st.integers(-1, 5),
                                                     "on_in_doubt": st.booleans()}),
        "for_each": st.fixed_dictionaries({}, optional={
            "file": st.sampled_from(["rows.csv", "rows.txt"]), "step": st.sampled_from(["a", "b", "zz"]),
            "table": st.sampled_from(["rows"]), "chunk": st.integers(0, 3), "field": words})})),
    min_size=1, max_size=4)}, optional={
    "vars": st.dictionaries(st.sampled_from(["v", "w", "row", "env"]), json_values, max_size=2),
    "mode": st.sampled_from(["sequential", "parallel"]), "max_concurrency": st.integers(0, 17),
    "serialize_on": st.sampled_from(["a", "a.b", ".x"]), "stop_on_error": st.booleans()})


@FUZZ
@given(value=pool_like | near_pools | json_values, as_yaml=st.booleans())
def test_any_structure_loads_as_a_pool_or_is_refused_with_a_pooler_error(folder: Path, value: Any,
                                                                         as_yaml: bool) -> None:
    path = folder / ("pool.yaml" if as_yaml else "pool.json")
    text = yaml.safe_dump(value, allow_unicode=True) if as_yaml else json.dumps(value)
    path.write_text(text, encoding="utf-8")
    for pool in (loaded_or_refused(load_pool, path), loaded_or_refused(load_pool_value, value, base=folder)):
        if pool is None:
            continue
        problems = check_pool(pool) + check_options(pool) + check_pool(pool, {"x": 1})
        assert all(isinstance(p, Problem) and p.message for p in problems)
        assert all(isinstance(p, Problem) for p in check_against(pool, TOOLS))


#: The reference store's declarations, as tool_list gives them.
TOOLS: list[dict[str, Any]] = []


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = start_store(tmp_path_factory.mktemp("fuzz-store"))
    with ToolRunClient(s.url, s.token) as client:
        TOOLS[:] = client.tool_list().data["tools"]
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def _tools(store: Store) -> None:
    """Every test here may use TOOLS, so the store starts first."""


# The reference resolver

names = words.filter(lambda w: w not in RESERVED_NAMES)


@FUZZ
@given(details=st.dictionaries(names, st.dictionaries(words, json_values, min_size=1, max_size=4),
                               min_size=1, max_size=3), data=st.data())
def test_a_reference_gives_the_value_it_names_with_its_type(details: dict[str, Any],
                                                            data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(details)))
    field = data.draw(st.sampled_from(sorted(details[name])))
    value = details[name][field]
    written = data.draw(st.sampled_from([name, name.upper(), name.capitalize()]))
    params = {"whole": f"@{written}.{field}", "inside": [f"@{written}.{field}"]}
    got = resolve(params, details, set(details))
    for found in (got["whole"], got["inside"][0]):
        assert found == value
        assert type(found) is type(value)
    if isinstance(value, dict) and value:
        deeper = data.draw(st.sampled_from(sorted(value)))
        if deeper and "." not in deeper and "@" not in deeper:
            assert resolve(f"@{name}.{field}.{deeper}", details, set(details)) == value[deeper]
    if isinstance(value, list) and value:
        index = data.draw(st.integers(0, len(value) - 1))
        assert resolve(f"@{name}.{field}.{index}", details, set(details)) == value[index]


@FUZZ
@given(params=json_values, details=st.dictionaries(names, st.dictionaries(words, json_values), max_size=2))
def test_a_value_that_is_not_a_reference_is_returned_unchanged(params: Any, details: dict[str, Any]) -> None:
    def has_at(value: Any) -> bool:
        # A "$" may open a template, which the run fills too: not what this property is about.
        if isinstance(value, str):
            return value.startswith("@") or "$" in value
        if isinstance(value, dict):
            return any(has_at(v) for v in value.values())
        if isinstance(value, list):
            return any(has_at(v) for v in value)
        return False

    if not has_at(params):
        assert resolve(params, details, set(details)) is params
        assert find_refs(params) == []
    # A reference to a step that is not known is data: it goes as it is.
    unknown = {"x": "@nobody.field", "y": [1, "@nobody.other"]}
    assert resolve(unknown, details, set(details) - {"nobody"}) is unknown


@FUZZ
@given(scope=st.dictionaries(names, json_values, min_size=1, max_size=3), data=st.data())
def test_a_whole_template_keeps_its_type_and_a_plain_value_is_unchanged(scope: dict[str, Any],
                                                                        data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(scope)))
    got = substitute({"v": f"${{{name}}}", "list": [f"${{{name}}}"]}, scope)
    assert got["v"] == scope[name]
    assert type(got["v"]) is type(scope[name])
    plain = data.draw(plain_values)
    assert substitute(plain, scope) is plain


# Checked pools run clean


def expected_fields(params: dict[str, Any]) -> dict[str, Any]:
    """What CmdEcho answers: the fields as received (the store drops a field whose value is null)."""
    return {k: v for k, v in params.items() if v is not None}


@st.composite
def checked_pools(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A pool of CmdEcho steps with variables, templates, references, escapes and keys, and the
    detail each step should answer."""
    variables = draw(st.dictionaries(names, plain_values, max_size=3))
    text_vars = [n for n, v in variables.items() if isinstance(v, str | int) and not isinstance(v, bool)]
    count = draw(st.integers(1, 5))
    step_names = draw(st.lists(names, min_size=count, max_size=count, unique=True))
    steps: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    for i in range(count):
        params: dict[str, Any] = {}
        sent: dict[str, Any] = {}
        for field in draw(st.lists(words, max_size=4, unique=True)):
            kinds = ["plain", "escape"] + (["whole", "inside"] if variables else [])
            earlier = [j for j in range(i) if steps[j].get("name") and details[j]]
            if earlier:
                kinds.append("ref")
            kind = draw(st.sampled_from(kinds))
            if kind == "plain":
                value = draw(plain_values)
                params[field], sent[field] = value, value
            elif kind == "escape":
                word = draw(words)
                params[field], sent[field] = draw(st.sampled_from([
                    (f"@@{word}", f"@{word}"), (f"$${{{word}}}", f"${{{word}}}")]))
            elif kind == "whole":
                var = draw(st.sampled_from(sorted(variables)))
                params[field], sent[field] = f"${{{var}}}", variables[var]
            elif kind == "inside" and text_vars:
                var = draw(st.sampled_from(sorted(text_vars)))
                params[field], sent[field] = f"<${{{var}}}>", f"<{variables[var]}>"
            elif kind == "ref":
                j = draw(st.sampled_from(earlier))
                target = draw(st.sampled_from(sorted(details[j])))
                params[field], sent[field] = f"@{steps[j]['name']}.{target}", details[j][target]
        step: dict[str, Any] = {"unit": TEST, "command": "CmdEcho", "params": params}
        if draw(st.booleans()):
            step["name"] = step_names[i]
        if draw(st.booleans()):
            tail = f"${{{draw(st.sampled_from(sorted(text_vars)))}}}" if text_vars else "x"
            step["key"] = f"k{i}-{tail}"
        steps.append(step)
        details.append(expected_fields(sent))
    pool: dict[str, Any] = {"vars": {n: {"default": v} for n, v in variables.items()}, "pool": steps}
    mode = draw(st.sampled_from(["sequential", "parallel"]))
    pool["mode"] = mode
    pool["max_concurrency"] = draw(st.integers(1, 16))
    pool["stop_on_error"] = draw(st.booleans())
    if mode == "parallel" and draw(st.booleans()):
        pool["serialize_on"] = draw(words)
    return pool, details


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err, environ=environment({"POOLER_TOKEN": STORE_TOKEN}))
    return status, out.getvalue(), err.getvalue()


#: Plain scalars the YAML 1.2 core schema pooler reads with takes for numbers, which PyYAML (1.1)
#: takes for text and so writes bare: ``1e100``, ``0o17``, ``.inf``.
_CORE_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|0o[0-7]+|0x[0-9a-fA-F]+"
                          r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


class _CoreDumper(yaml.SafeDumper):
    """PyYAML's writer, quoting the text a YAML 1.2 reader would read as a number."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "'" if _CORE_NUMBER.fullmatch(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_CoreDumper.add_representer(str, _text)


def core_yaml(value: Any) -> str:
    """``value`` as YAML that reads back the same under the core schema."""
    return yaml.dump(value, Dumper=_CoreDumper)


@FUZZ_RUNS
@given(case=checked_pools(), as_yaml=st.booleans())
def test_a_pool_that_passes_check_runs_without_failing_the_checks(store: Store, folder: Path, case: Any,
                                                                 as_yaml: bool) -> None:
    pool, details = case
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        path = work / ("pool.yaml" if as_yaml else "pool.json")
        # PyYAML writes some line breaks (U+0085) raw with allow_unicode and then reads them
        # back as spaces; escaped, every string survives the round trip.
        path.write_text(core_yaml(pool) if as_yaml else json.dumps(pool), encoding="utf-8")
        problems = check_file(str(path), TOOLS)
        if problems:
            event("refused by check")
        assume(not problems)
        status, out, err = cli("run", str(path), "--dry-run", "--json")
        assert status == 0, err
        assert json.loads(out)
        status, out, err = cli("run", str(path), "--store", store.url, "--out", str(work / "out"),
                               "--journal", str(folder / "journal.sqlite"), "--json")
        assert status == 0, err
        answer = json.loads(out)
        assert [e["status"] for e in answer["steps"]] == ["completed"] * len(details)
        for entry, detail in zip(answer["steps"], details, strict=True):
            if "detail" in entry:
                assert entry["detail"] == detail
