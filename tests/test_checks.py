"""The meaning checks beyond the broken files of tests/pools: overrides, variables, escapes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pooler.pool.checks import check_options, check_pool
from pooler.pool.loader import load_pool, load_pool_value
from pooler.pool.model import Options, Pool


def pool_of(tmp_path: Path, text: str) -> Pool:
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    return load_pool(path)


def messages(pool: Pool, variables: dict[str, Any] | None = None) -> list[str]:
    return [p.message for p in check_pool(pool, variables)]


ECHO = "  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"


def test_options_set_on_the_command_line_have_no_spot_in_the_file(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, "mode: parallel\npool:\n" + ECHO)
    overridden = dataclasses.replace(pool, options=Options(mode="fast", max_concurrency=0))  # type: ignore[arg-type]
    assert [p.headline() for p in check_options(overridden)] == [
        f"{pool.file}:1:7: Unknown mode [fast] - the mode is sequential or parallel.",
        f"{pool.file}: max_concurrency must be 1 to 16, not 0 - a pool sends at most 16 calls at once.",
    ]


def test_serialize_on_becomes_wrong_when_the_mode_is_overridden(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, "mode: parallel\nserialize_on: contract\npool:\n" + ECHO)
    assert check_options(pool) == []
    sequential = dataclasses.replace(pool, options=dataclasses.replace(pool.options, mode="sequential"))
    assert [p.headline() for p in check_options(sequential)] == [
        (f"{pool.file}:2:15: serialize_on goes with mode: parallel - with mode: sequential it would "
         "silently do nothing; set mode: parallel, or remove serialize_on.")]


def test_max_concurrency_bounds(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, "pool:\n" + ECHO)
    for good in (1, 16):
        assert check_options(dataclasses.replace(pool, options=Options(max_concurrency=good))) == []
    for bad in (17, -1, True):
        assert len(check_options(dataclasses.replace(pool, options=Options(max_concurrency=bad)))) == 1


def test_keys_are_compared_with_variables_filled_in(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, (
        "vars:\n  n: 1\npool:\n"
        "  - {unit: U, command: C, key: order-1}\n"
        "  - {unit: U, command: C, key: 'order-${n}'}\n"
    ))
    assert messages(pool) == []
    assert messages(pool, {"n": 1}) == [
        ("Two steps carry the key [order-1] - steps 1 and 2; keys must be unique in a pool: a keyed call "
         "runs at most once per task.")]
    assert messages(pool, {"n": 2}) == []


def test_variables_without_a_value_when_values_are_given(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, "vars:\n  token:\n  n: 1\npool:\n" + ECHO)
    assert messages(pool) == []
    assert [p.headline() for p in check_pool(pool, {"n": 1})] == [
        (f"{pool.file}:2:3: The variable [token] has no value - give it with --var token=VALUE, or give "
         "it a default under vars.")]


def test_escapes_and_ordinary_at_words_are_not_references(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, (
        "vars:\n  step: cur\npool:\n  - name: cur\n    unit: U\n    command: C\n"
        "  - unit: U\n    command: C\n    params:\n"
        "      a: '@@cur.id'\n      b: '@ 5pm'\n      c: '@home'\n      d: 'mail@cur.id'\n"
        "      e: '@${step}.id'\n      f: '@cur.row.0.id'\n      g: ['@CUR.id']\n"
    ))
    assert messages(pool) == []


def test_a_mail_address_like_string_is_told(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, "pool:\n  - unit: U\n    command: C\n    params: {to: '@example.com'}\n")
    assert messages(pool) == [
        "@example.com names no step - it would be sent as text. Write @@example.com to send a literal @."]


def test_templates_in_keys_are_checked(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, (
        "vars:\n  run: 1\npool:\n"
        "  - {unit: U, command: C, key: 'k-${rn}'}\n"
        "  - {unit: U, command: C, key: 'k-${task.id}'}\n"
        "  - {unit: U, command: C, key: 'k-${}', params: {a: '${run}'}}\n"
    ))
    assert [p.headline() for p in check_pool(pool)] == [
        f"{pool.file}:4:35: ${{rn}} in key of step 1 names no variable - did you mean run?",
        f"{pool.file}:5:35: ${{task.id}} in key of step 2: [task] is a reserved name, not a variable.",
        (f"{pool.file}:6:32: key of step 3 holds an empty ${{}} - write ${{name}} with the name of a "
         "variable."),
    ]


def test_rows_in_keys_of_chunked_and_row_steps_are_fine(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, (
        "pool:\n"
        "  - {unit: U, command: C, key: 'r-${row.id}', for_each: {file: a.csv}, params: {x: '${row.x}'}}\n"
        "  - {unit: U, command: C, key: 'c-${row.id}', for_each: {file: a.jsonl, chunk: 5, field: rows}}\n"
    ))
    assert messages(pool) == []


def test_for_each_over_an_earlier_steps_table(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, (
        "pool:\n  - {name: list, unit: U, command: CmdList}\n"
        "  - {unit: U, command: C, for_each: {step: LIST, table: goods}, key: 'g-${row.id}'}\n"
        "  - {unit: U, command: C, for_each: {step: lst, table: goods}}\n"
    ))
    assert messages(pool) == ["for_each.step of step 3 names no step [lst] - did you mean list?"]


def test_a_reference_one_slip_from_a_short_step_name_is_told_with_did_you_mean_at_its_place(
        tmp_path: Path) -> None:
    pool = pool_of(tmp_path, "pool:\n  - {name: aa, unit: U, command: C}\n"
                             "  - {unit: U, command: C, params: {of: \"@ab.id\"}}\n")
    assert [p.headline() for p in check_pool(pool)] == [
        (f"{pool.file}:3:40: @ab.id names no step - it would be sent as text. Did you mean @aa.id? "
        "Write @@ab.id to send a literal @.")]


def test_problems_of_a_value_pool_carry_step_and_path(tmp_path: Path) -> None:
    pool = load_pool_value({"pool": [{"unit": "U", "command": "C", "params": {"a": {"b": ["@x.id"]}}}]},
                           file="<tool_pool>", base=tmp_path)
    (problem,) = check_pool(pool)
    assert (problem.file, problem.line, problem.step, problem.path) == (
        "<tool_pool>", None, 1, "pool[0].params.a.b[0]")
    assert problem.message == ("@x.id names no step - it would be sent as text. Write @@x.id to send a "
                               "literal @.")


def test_problems_come_in_file_order(tmp_path: Path) -> None:
    pool = pool_of(tmp_path, (
        "vars:\n  pool: 1\nmode: sequential\nserialize_on: a\npool:\n"
        "  - {name: task, unit: U, command: C, into: a.b}\n"
    ))
    assert [(p.line, p.message.split(" - ")[0]) for p in check_pool(pool)] == [
        (2, "The variable name [pool] is reserved"),
        (4, "serialize_on goes with mode: parallel"),
        (6, "The name of step 1 is reserved: [task]"),
        (6, "into is the bare name of a job"),
    ]


@pytest.mark.parametrize("into", ["photos", "job_2024", "a-b"])
def test_bare_job_names_pass(tmp_path: Path, into: str) -> None:
    pool = pool_of(tmp_path, f"pool:\n  - {{unit: U, command: C, into: {into}}}\n")
    assert messages(pool) == []


@pytest.mark.parametrize("into", ["a.b", "../x", "a b", "c:\\\\x", "dir/job"])
def test_job_names_with_a_path_or_a_dot_are_refused(tmp_path: Path, into: str) -> None:
    pool = pool_of(tmp_path, f"pool:\n  - {{unit: U, command: C, into: '{into}'}}\n")
    (message,) = messages(pool)
    assert message.startswith("into is the bare name of a job - [")
