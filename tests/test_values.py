"""Templates and variables: substitution keeps types, precedence of the sources, secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pooler.errors import CheckFailed, InputError, UsageError
from pooler.pool.loader import load_pool
from pooler.pool.model import Pool
from pooler.pool.variables import (
    Piece,
    Variables,
    parse_var,
    placeholders,
    resolve_variables,
    scan,
    substitute,
)

EXAMPLES = int(os.environ.get("POOLER_FUZZ_EXAMPLES", "200"))
SCOPE: dict[str, Any] = {
    "n": 3, "rate": 44.2, "name": "Euro", "flag": False, "nothing": None,
    "cfg": {"url": "http://127.0.0.1:1", "ids": [7, 8]},
    "row": {"sku": "A-1", "price": "1.50", "tags": ["x", "y"], "nested": {"deep": 1}},
}


def pool_file(tmp_path: Path, vars_text: str) -> Pool:
    path = tmp_path / "p.yaml"
    path.write_text(f"vars:\n{vars_text}pool: [{{unit: U, command: C}}]\n", encoding="utf-8")
    return load_pool(path)


@pytest.mark.parametrize(("template", "value"), [
    ("${n}", 3),
    ("${rate}", 44.2),
    ("${flag}", False),
    ("${nothing}", None),
    ("${cfg}", {"url": "http://127.0.0.1:1", "ids": [7, 8]}),
    ("${cfg.ids}", [7, 8]),
    ("${cfg.ids.1}", 8),
    ("${ row.sku }", "A-1"),
    ("${row.nested.deep}", 1),
    ("${row.tags.0}", "x"),
])
def test_a_whole_template_keeps_the_values_type(template: str, value: Any) -> None:
    found = substitute(template, SCOPE)
    assert found == value
    assert type(found) is type(value)


@pytest.mark.parametrize(("template", "text"), [
    ("n=${n}", "n=3"),
    ("${name} at ${rate}", "Euro at 44.2"),
    ("flag ${flag}, none ${nothing}", "flag false, none null"),
    ("cfg: ${cfg}", 'cfg: {"url": "http://127.0.0.1:1", "ids": [7, 8]}'),
    ("sku-${row.sku}-${row.tags}", 'sku-A-1-["x", "y"]'),
    ("$${n} is ${n}", "${n} is 3"),
    ("$${n}", "${n}"),
    ("cost: $5 and $$6", "cost: $5 and $$6"),
    ("no template", "no template"),
])
def test_a_template_inside_text_is_written_as_text(template: str, text: str) -> None:
    assert substitute(template, SCOPE) == text


def test_substitute_walks_objects_and_lists_and_leaves_keys_alone() -> None:
    params = {"${n}": "${n}", "list": ["${row.sku}", 1, {"p": "${row.price}"}], "plain": "x"}
    assert substitute(params, SCOPE) == {"${n}": 3, "list": ["A-1", 1, {"p": "1.50"}], "plain": "x"}


def test_substitute_copies_nothing_when_nothing_changes() -> None:
    params = {"a": [1, "two", {"b": None}], "c": "$5"}
    assert substitute(params, SCOPE) is params


@pytest.mark.parametrize(("template", "message"), [
    ("${nope}", "${nope} names no variable - declare it under vars."),
    ("${nam}", "${nam} names no variable - did you mean name?"),
    ("${env.HOME}", ("${env.HOME} reads the environment directly, which a pool may not do - declare a "
                     "variable under vars with env: HOME (vars: {home: {env: HOME}}) and write ${home}.")),
    ("${row.skuu}", "${row.skuu}: row has no field [skuu] - its fields: sku, price, tags, nested."),
    ("${cfg.ids.5}", "${cfg.ids.5}: cfg.ids has no field [5]."),
    ("id ${n", "'${n' opens ${ but never closes it - write ${name}, or $${ for a literal ${."),
])
def test_a_template_that_cannot_be_filled(template: str, message: str) -> None:
    with pytest.raises(InputError) as failed:
        substitute(template, SCOPE)
    assert failed.value.message == message


def test_row_outside_a_step_over_rows() -> None:
    with pytest.raises(InputError) as failed:
        substitute("${row.sku}", {"n": 1})
    assert failed.value.message == ("${row.sku}: only a step with for_each has a row - give the step "
                                    "for_each, or use a variable.")


def test_placeholders_names_every_template_with_its_path() -> None:
    params = {"a": "${x} and ${row.y}", "b": [{"c": "$${not} ${ z }"}], "d": "x ${open", "e": 5}
    assert list(placeholders(params)) == [(("a",), "x"), (("a",), "row.y"), (("b", 0, "c"), "z"),
                                          (("d",), "${open")]


def test_scan_splits_text_and_names() -> None:
    assert scan("a${b}c$${d}") == [Piece(text="a"), Piece(text="${b}", name="b"), Piece(text="c${d}")]


@pytest.mark.parametrize(("text", "value"), [
    ("3", 3), ("-2.5", -2.5), ("1e5", 100000.0), ("abc", "abc"), ("'3'", "3"), ('"007"', "007"),
    ("true", True), ("yes", "yes"), ("null", None), ("", ""), ("[1, 2]", "[1, 2]"), ("a: b", "a: b"),
    ("@foo", "@foo"), ("0x10", 16),
])
def test_a_var_from_the_command_line_is_a_yaml_scalar(text: str, value: Any) -> None:
    found = parse_var(text)
    assert found == value
    assert type(found) is type(value)


def test_precedence_var_over_file_over_env_over_default(tmp_path: Path) -> None:
    pool = pool_file(tmp_path, (
        "  a: {default: 1, env: POOLER_T_A}\n  b: {default: 1, env: POOLER_T_B}\n"
        "  c: {default: 1, env: POOLER_T_C}\n  d: {default: 1, env: POOLER_T_D}\n"
    ))
    vars_file = tmp_path / "vars.yaml"
    vars_file.write_text("a: from-file\nb: [2, 3]\n", encoding="utf-8")
    environ = {"POOLER_T_A": "env", "POOLER_T_B": "env", "POOLER_T_C": "env"}
    found = resolve_variables(pool, {"a": "4"}, vars_file, environ)
    assert found.values == {"a": 4, "b": [2, 3], "c": "env", "d": 1}
    assert found.secrets == {"env"}


def test_secrets_are_the_declared_ones_and_the_ones_from_the_environment(tmp_path: Path) -> None:
    pool = pool_file(tmp_path, (
        "  token: {env: POOLER_T_TOKEN, secret: true}\n  pin: {default: 4711, secret: true}\n"
        "  url: {env: POOLER_T_URL}\n  plain: visible\n"
    ))
    found = resolve_variables(pool, {}, None, {"POOLER_T_TOKEN": "s3cret-token", "POOLER_T_URL": "http://x"})
    assert found == Variables(
        values={"token": "s3cret-token", "pin": 4711, "url": "http://x", "plain": "visible"},
        secrets={"s3cret-token", "4711", "http://x"}, secret_names=["token", "pin", "url"],
    )


def test_a_var_the_pool_does_not_declare(tmp_path: Path) -> None:
    pool = pool_file(tmp_path, "  currency: EUR\n  rate: 1\n")
    with pytest.raises(UsageError) as refused:
        resolve_variables(pool, {"curency": "USD"}, None, {})
    assert refused.value.message == (f"--var curency: {pool.file} declares no variable [curency] - did you "
                                     "mean currency?")
    with pytest.raises(UsageError) as refused:
        resolve_variables(pool, {"zzz": "1"}, None, {})
    assert refused.value.message == (f"--var zzz: {pool.file} declares no variable [zzz] - it declares: "
                                     "currency, rate.")


def test_variables_left_without_a_value_are_told_at_their_declaration(tmp_path: Path) -> None:
    pool = pool_file(tmp_path, "  token: {env: POOLER_T_NONE}\n  user:\n  ok: 1\n")
    with pytest.raises(CheckFailed) as failed:
        resolve_variables(pool, {}, None, {})
    assert [p.headline() for p in failed.value.problems()] == [
        (f"{pool.file}:2:3: The variable [token] has no value - give it with --var token=VALUE, set the "
         "environment variable POOLER_T_NONE, or give it a default under vars."),
        (f"{pool.file}:3:3: The variable [user] has no value - give it with --var user=VALUE, or give it a "
         "default under vars."),
    ]


def test_a_vars_file_naming_undeclared_variables(tmp_path: Path) -> None:
    pool = pool_file(tmp_path, "  currency: EUR\n")
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps({"currency": "USD", "curency": "GBP", "other": 1}), encoding="utf-8")
    resolved = resolve_variables(pool, {}, vars_file, {})
    assert resolved.values == {"currency": "USD"}
    assert [p.message for p in resolved.ignored] == [
        f"{vars_file} sets [curency], which {pool.file} does not declare: ignored - did you mean currency?",
        f"{vars_file} sets [other], which {pool.file} does not declare: ignored",
    ]
    assert resolved.ignored[0].line == 1


def test_a_vars_file_that_is_no_mapping(tmp_path: Path) -> None:
    pool = pool_file(tmp_path, "  currency: EUR\n")
    vars_file = tmp_path / "vars.yaml"
    vars_file.write_text("- EUR\n", encoding="utf-8")
    with pytest.raises(InputError) as failed:
        resolve_variables(pool, {}, vars_file, {})
    assert failed.value.message == f"{vars_file} holds no mapping of variables - write name: value lines."


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(value=json_values)
def test_substitute_keeps_any_value_whole(value: Any) -> None:
    found = substitute("${v}", {"v": value})
    assert found == value or found != found  # a float nan is not equal to itself
    assert type(found) is type(value)
    assert substitute({"a": ["${v}"]}, {"v": value}) == {"a": [value]} or value != value


@settings(max_examples=EXAMPLES, deadline=None)
@given(value=json_values)
def test_substitute_leaves_values_without_templates_unchanged(value: Any) -> None:
    text = json.dumps(value)
    if "$" in text:
        return
    assert substitute(value, {}) is value


@settings(max_examples=EXAMPLES, deadline=None)
@given(value=json_values, before=st.text(min_size=1, max_size=5).filter(lambda t: "$" not in t))
def test_inside_text_a_value_is_its_json_text(value: Any, before: str) -> None:
    found = substitute(before + "${v}", {"v": value})
    expected = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    assert found == before + expected


KEY_TEMPLATES = ["goods-${row.ref}", "${row.ref}", "plain", "$${x}-${row.ref}", "${v}-${row.n}", "${row.a.b}",
                 "${row}", "${row.missing}", "${nov}", "${env.HOME}", "k-${row.n}", "open ${row.ref"]
KEY_SCOPES = [{"v": "V", "row": {"ref": "R1", "n": 5, "a": {"b": "c"}}},
              {"v": 3, "row": {"ref": None, "n": "x"}}, {"row": {"ref": "é", "n": [1]}}, {"v": "only"}]


@pytest.mark.parametrize("template", KEY_TEMPLATES)
def test_a_key_filled_once_for_a_file_is_the_key_render_key_gives_or_its_refusal(template: str) -> None:
    from pooler.errors import PoolerError  # noqa: PLC0415
    from pooler.pool.variables import key_filler, render_key  # noqa: PLC0415

    def outcome(fill: Any, scope: dict[str, Any]) -> Any:
        try:
            return fill(scope)
        except PoolerError as exc:
            return ("refused", type(exc), exc.message)

    fill = key_filler(template)
    for scope in KEY_SCOPES:
        assert outcome(fill, scope) == outcome(lambda s: render_key(template, s), scope)
