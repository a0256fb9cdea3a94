"""A Russian spreadsheet's price list: check reads its values, and decimal commas are numbers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import Store, answer_of, pooler

HEADER = "артикул;название;цена"
POOL = """\
pool:
  - name: prices
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    for_each: {{file: prices.csv, delimiter: ";", encoding: cp1251{decimal}}}
    key: price-${{row.артикул}}
    params: {{sku: "${{row.артикул}}", name: "${{row.название}}", price: "${{row.цена}}"}}
"""


def price_list(tmp_path: Path, decimal: str = "", extra: tuple[str, ...] = ()) -> Path:
    rows = [HEADER, *(f"RU-{i:03};Самовар {i};{5306 + i},19" for i in range(12)), *extra]
    (tmp_path / "prices.csv").write_bytes(("\r\n".join(rows) + "\r\n").encode("cp1251"))
    pool = tmp_path / "pool.yaml"
    pool.write_text(POOL.format(decimal=decimal), encoding="utf-8")
    return pool


def check(store: Store, pool: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return pooler("check", str(pool), "--data", "--against", store.url, *extra,
                  env={"POOLER_TOKEN": store.token})


def test_check_data_against_reads_every_value_and_names_file_line_column_and_field(
        store: Store, tmp_path: Path) -> None:
    pool = price_list(tmp_path)
    proc = check(store, pool)
    assert proc.returncode == 2
    data = tmp_path / "prices.csv"
    told = [f"{data}:{line}: column цена (3): the field [price] of MELBIS_AGENT_STORE.CmdAdd takes float: "
            f'"{5304 + line},19" is not a number - step 1 prices would be refused at this row.\n'
            f"    (read by {pool})\n" for line in range(2, 7)]
    assert proc.stdout == ("".join(told) +
                           f"{data}:7: and 7 more rows in {data} whose values the field types of "
                           f"MELBIS_AGENT_STORE.CmdAdd refuse (step 1).\n    (read by {pool})\n"
                           "6 problems in 1 of 1 file\n")
    # Without --data only the header is read; with it, nothing is sent either way.
    assert check(store, pool, "--json").returncode == 2
    assert pooler("check", str(pool), "--against", store.url,
                  env={"POOLER_TOKEN": store.token}).returncode == 0
    assert store.ops() == []


def test_one_bad_value_in_a_decimal_comma_list_is_its_one_problem(store: Store, tmp_path: Path) -> None:
    pool = price_list(tmp_path, ', decimal: ","', ("RU-900;Чайник;нет",))
    proc = check(store, pool, "--json")
    assert proc.returncode == 2
    problems = answer_of(proc)["files"][0]["problems"]
    assert [(p["file"], p["line"], p["message"]) for p in problems] == [
        (str(tmp_path / "prices.csv"), 14,
         ('column цена (3): the field [price] of MELBIS_AGENT_STORE.CmdAdd takes float: "нет" is not a '
          "number - step 1 prices would be refused at this row."))]


def test_a_jsonl_row_is_named_by_its_line_and_field(store: Store, tmp_path: Path) -> None:
    rows = [{"sku": "J-1", "name": "a", "qty": 2}, {"sku": "J-2", "name": "b", "qty": "two"}]
    (tmp_path / "goods.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - unit: MELBIS_AGENT_CURRENCY\n    command: CmdAdd\n"
                    "    for_each: {file: goods.jsonl}\n"
                    '    params: {name: "${row.name}", pos: "${row.qty}"}\n', encoding="utf-8")
    proc = check(store, pool)
    assert proc.returncode == 2
    assert proc.stdout.startswith(
        f"{tmp_path / 'goods.jsonl'}:2: column qty: the field [pos] of MELBIS_AGENT_CURRENCY.CmdAdd takes "
        'int: "two" is not a whole number - step 1 would be refused at this row.\n')


ECHO = """\
pool:
  - unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: prices.csv, delimiter: ";", decimal: ","}
    params: {price: "${row.price}", said: "costs ${row.price}", code: "${row.code}"}
"""


def test_a_decimal_comma_fills_a_whole_row_value_as_that_number(store: Store, tmp_path: Path) -> None:
    # A space, a no-break space and a narrow no-break space between thousands; a code with a
    # leading zero and text stay text; a value used inside longer text stays as written.
    lines = ["price;code", "5306,19;007", "1 234,56;A-1,5", "1\u00a0234,5;x", "12\u202f345;1,5", "-0,25;"]
    (tmp_path / "prices.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    pool = tmp_path / "echo.yaml"
    pool.write_text(ECHO, encoding="utf-8")
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "j.sqlite"), "--json", env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 0, proc.stderr
    sent = [op["params"] for op in store.ops()]
    assert sent == [
        {"price": 5306.19, "said": "costs 5306,19", "code": "007"},
        {"price": 1234.56, "said": "costs 1 234,56", "code": "A-1,5"},
        {"price": 1234.5, "said": "costs 1\u00a0234,5", "code": "x"},
        {"price": 12345, "said": "costs 12\u202f345", "code": 1.5},
        {"price": -0.25, "said": "costs -0,25", "code": ""},
    ]


def test_decimal_takes_only_a_point_or_a_comma_and_only_beside_a_csv_file(tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text('{"a": "1,5"}\n', encoding="utf-8")
    (tmp_path / "rows.csv").write_text("a\n1\n", encoding="utf-8")
    step = ("pool:\n  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n"
            "    for_each: {{file: {f}, decimal: {d}}}\n"
            '    params: {{a: "${{row.a}}"}}\n')
    jsonl = tmp_path / "jsonl.yaml"
    jsonl.write_text(step.format(f="rows.jsonl", d='","'), encoding="utf-8")
    other = tmp_path / "other.yaml"
    other.write_text(step.format(f="rows.csv", d='";"'), encoding="utf-8")
    proc = pooler("check", str(jsonl), str(other))
    assert proc.returncode == 2
    assert (f"{jsonl}:4:43: for_each.decimal of step 1 goes with a CSV file - rows.jsonl is not one, and its "
            "numbers are numbers already; remove it.\n") in proc.stdout
    assert (f'{other}:4:41: for_each.decimal of step 1 must be one of ".", ",", not the text ";".\n'
            in proc.stdout)
