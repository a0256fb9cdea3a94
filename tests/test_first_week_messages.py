"""Messages that point at the fix: where the mistake stands, and what to write instead."""

from __future__ import annotations

from pathlib import Path

from helpers import Store, answer_of, pooler

SAMOVAR = """\
pool:
  - name: samovar
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    params: {sku: SAM-1, name: Samovar}
  - name: note
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    params:
      about: samovar
      sku: "@samovar.sku"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_reference_to_a_field_the_detail_lacks_says_where_it_stands_and_what_the_detail_has(
        store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "samovar.yaml", SAMOVAR)
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), "--json", env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 1, proc.stderr
    step = answer_of(proc)["steps"][1]
    assert step["status"] == "failed"
    assert step["message"] == (f"{pool}:11:12: @samovar.sku names a field the detail of that step does not "
                               "have. The detail has id, row - did you mean @samovar.row.sku?")
    assert [op["command"] for op in store.ops()] == ["CmdAdd"]


def test_a_reference_deeper_in_the_detail_lists_the_fields_of_the_level_it_missed(
        store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "deep.yaml", SAMOVAR.replace('"@samovar.sku"', '"@samovar.row.skuu"'))
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), "--json", env={"POOLER_TOKEN": store.token})
    assert answer_of(proc)["steps"][1]["message"] == (
        f"{pool}:11:12: @samovar.row.skuu names a field the detail of that step does not have. row in the "
        "detail has id, sku, name, price, curr_id - did you mean @samovar.row.sku?")


def test_an_unquoted_reference_in_yaml_says_to_quote_it_and_shows_the_quoted_form(tmp_path: Path) -> None:
    flow = write(tmp_path, "flow.yaml",
                 "pool:\n  - unit: U\n    command: C\n    params: {id: @cur.id, n: 1}\n")
    block = write(tmp_path, "block.yaml",
                  "pool:\n  - unit: U\n    command: C\n    params:\n      note: `as is`  # why\n")
    proc = pooler("check", str(flow), str(block))
    assert proc.returncode == 2
    assert proc.stdout == (
        f"{flow}:4:18: a YAML value that starts with @ must be quoted (YAML keeps @ for itself): "
        'write "@cur.id".\n'
        "    4 |     params: {id: @cur.id, n: 1}\n"
        "      |                  ^\n"
        f"{block}:5:13: a YAML value that starts with ` must be quoted (YAML keeps ` for itself): "
        'write "`as is`".\n'
        "    5 |       note: `as is`  # why\n"
        "      |             ^\n"
        "2 problems in 2 of 2 files\n")


ENV_POOL = """\
vars:
  signature: {env: SHOP_SIGNATURE}
  currency: {env: SHOP_CUR, default: EUR, secret: false}
pool:
  - unit: MELBIS_AGENT_TEST
    command: CmdEcho
    params: {sig: "${signature}", cur: "${currency}"}
"""


def test_check_without_env_names_what_run_will_read_from_the_environment(store: Store,
                                                                         tmp_path: Path) -> None:
    pool = write(tmp_path, "env.yaml", ENV_POOL)
    proc = pooler("check", str(pool))
    assert proc.returncode == 0
    assert proc.stdout == (
        f"pooler: notice: {pool}: run reads SHOP_SIGNATURE (variable signature) from the environment, which "
        "this check did not read - run refuses the pool if it is unset; check with --env where run has it.\n"
        "1 file valid\n")
    # Where run has it, --env reads it as run does: no notice.
    given = pooler("check", str(pool), "--env", env={"SHOP_SIGNATURE": "sig-0123456789abc"})
    assert (given.returncode, given.stdout) == (0, "1 file valid\n")
    # And run, without it, refuses what the notice said.
    refused = pooler("run", str(pool), "--store", store.url, "--journal", str(tmp_path / "j.sqlite"),
                     "--out", str(tmp_path / "out"), env={"POOLER_TOKEN": store.token})
    assert refused.returncode == 2
    assert "SHOP_SIGNATURE" in refused.stderr


def test_the_caret_of_an_undeclared_variable_inside_a_key_points_at_it(tmp_path: Path) -> None:
    write(tmp_path, "goods.csv", "sku\nA-1\n")
    pool = write(tmp_path, "key.yaml", "pool:\n  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"
                                       "    for_each: {file: goods.csv}\n    key: goods-${row.sku}-${skuu}\n"
                                       '    params: {a: "x ${ skuu } y"}\n')
    proc = pooler("check", str(pool))
    assert proc.returncode == 2
    assert proc.stdout == (
        f"{pool}:5:27: ${{skuu}} in key of step 1 names no variable - declare it under vars.\n"
        "    5 |     key: goods-${row.sku}-${skuu}\n"
        "      |                           ^\n"
        f"{pool}:6:20: ${{skuu}} in params.a of step 1 names no variable - declare it under vars.\n"
        '    6 |     params: {a: "x ${ skuu } y"}\n'
        "      |                    ^\n"
        "2 problems in 1 of 1 file\n")
