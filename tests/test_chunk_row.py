"""chunk_row: a chunk's rows shaped like params, so a spreadsheet's own export feeds a bulk import.

A cp1251 export with Cyrillic headers and decimal commas goes through the reference store's
MELBIS_AGENT_IMPORT_GOODS (rows {ref, sku, name, price}, sku and name required) as it is, and the
check tells what the import would refuse before anything is sent.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import Store, answer_of, pooler

HEADER = "артикул;наименование;цена"
SHAPE = '{sku: "${row.артикул}", name: "${row.наименование}", price: "${row.цена}", ref: "${row.артикул}"}'
POOL = """\
pool:
  - name: import
    unit: MELBIS_AGENT_IMPORT_GOODS
    command: CmdAdd
    for_each: {{file: goods.csv, delimiter: ";", encoding: cp1251, decimal: ",", chunk: 3, field: goods}}
    key: import-${{row.артикул}}
{shape}"""


def export(tmp_path: Path, shape: str | None = SHAPE, extra: tuple[str, ...] = ()) -> Path:
    """Seven goods as a Russian spreadsheet saves them, and the pool that imports them."""
    rows = [HEADER, *(f"RU-{i:03};Самовар {i};{5306 + i},19" for i in range(7)), *extra]
    (tmp_path / "goods.csv").write_bytes(("\r\n".join(rows) + "\r\n").encode("cp1251"))
    pool = tmp_path / "pool.yaml"
    pool.write_text(POOL.format(shape=f"    chunk_row: {shape}\n" if shape else ""), encoding="utf-8")
    return pool


def check(store: Store, pool: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return pooler("check", str(pool), "--against", store.url, *extra, env={"POOLER_TOKEN": store.token})


def spot(pool: Path, text: str) -> str:
    """``file:line:column`` of the first ``text`` in the pool file."""
    for number, line in enumerate(pool.read_text(encoding="utf-8").splitlines(), 1):
        if text in line:
            return f"{pool}:{number}:{line.index(text) + 1}"
    raise AssertionError(text)


def test_a_cp1251_export_shaped_by_chunk_row_lands_every_row_with_its_sku_name_and_price(
        store: Store, tmp_path: Path) -> None:
    pool = export(tmp_path)
    assert check(store, pool, "--data").returncode == 0
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"), "--json",
                  env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 0, proc.stderr
    assert answer_of(proc)["succeeded"] == 3
    sent = [op["params"]["goods"] for op in store.ops() if op["unit"] == "MELBIS_AGENT_IMPORT_GOODS"]
    assert sent[0] == [{"sku": f"RU-00{i}", "name": f"Самовар {i}", "price": 5306 + i + 0.19,
                        "ref": f"RU-00{i}"} for i in range(3)]
    goods = store.call("MELBIS_AGENT_STORE", "CmdList").json()["data"]["tables"]["goods"]
    assert [(g["sku"], g["name"], g["price"]) for g in goods] == [
        (f"RU-{i:03}", f"Самовар {i}", 5306 + i + 0.19) for i in range(7)]


def test_a_chunk_row_column_the_file_lacks_is_told_at_its_place_with_did_you_mean(tmp_path: Path) -> None:
    pool = export(tmp_path, SHAPE.replace("row.наименование", "row.наименвание"))
    proc = pooler("check", str(pool))
    assert proc.returncode == 2
    at = spot(pool, '"${row.наименвание}')
    assert proc.stdout.splitlines()[0] == (
        f"{at}: ${{row.наименвание}} in chunk_row.name of step 1: "
        f"{tmp_path / 'goods.csv'} has no field [наименвание] - did you mean наименование?")


def test_check_against_refuses_chunk_rows_that_cannot_carry_the_fields_the_import_requires(
        store: Store, tmp_path: Path) -> None:
    pool = export(tmp_path, shape=None)
    proc = check(store, pool)
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[0] == (
        f"{spot(pool, 'for_each')}: each row of the field [goods] of MELBIS_AGENT_IMPORT_GOODS.CmdAdd needs "
        f"[sku] and [name], and the rows of {tmp_path / 'goods.csv'} carry neither (its fields: артикул, "
        "наименование, цена) - shape each row with chunk_row, like chunk_row: {sku: \"${row.артикул}\"}.")
    shaped = export(tmp_path, '{sku: "${row.артикул}", price: "${row.цена}"}')
    proc = check(store, shaped)
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[0] == (
        f"{spot(shaped, 'chunk_row')}: chunk_row of step 1 gives no [name] - each row of the field [goods] "
        "of MELBIS_AGENT_IMPORT_GOODS.CmdAdd needs it (str).")
    assert store.ops() == []


def test_check_data_against_tells_a_chunk_row_value_the_declared_row_field_refuses(
        store: Store, tmp_path: Path) -> None:
    pool = export(tmp_path, extra=("RU-900;Чайник;нет", "RU-901;;12,5"))
    proc = check(store, pool, "--data")
    assert proc.returncode == 2
    data = tmp_path / "goods.csv"
    assert proc.stdout.splitlines()[::2] == [
        (f"{data}:9: column цена (3): the field [price] of each row of [goods] of "
        'MELBIS_AGENT_IMPORT_GOODS.CmdAdd takes float: "нет" is not a number - step 1 import would be '
        "refused at this row."),
        (f"{data}:10: column наименование (2): the field [name] of each row of [goods] of "
        "MELBIS_AGENT_IMPORT_GOODS.CmdAdd is required, and this row gives it empty - step 1 import would "
        "be refused at this row."),
        "2 problems in 1 of 1 file"]
    assert store.ops() == []


def test_chunk_row_goes_with_a_chunk_and_the_dry_run_shows_it(store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "lone.yaml"
    pool.write_text('pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, chunk_row: {a: "${row.a}"}}\n',
                    encoding="utf-8")
    proc = pooler("check", str(pool))
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[0] == (
        f"{spot(pool, 'chunk_row')}: chunk_row of step 1 shapes the rows a chunk sends - give the step "
        "for_each with chunk and field, or fill params instead.")
    shaped = export(tmp_path)
    proc = pooler("run", str(shaped), "--dry-run", "--json", "--store", store.url,
                  env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 0, proc.stderr
    rows = answer_of(proc)["steps"][0]["rows"]
    assert rows["chunk"] == 3
    assert rows["row"] == {"sku": "${row.артикул}", "name": "${row.наименование}", "price": "${row.цена}",
                           "ref": "${row.артикул}"}
    human = pooler("run", str(shaped), "--dry-run", "--store", store.url, env={"POOLER_TOKEN": store.token})
    assert ("3 a call as goods, each row {" + json.dumps(rows["row"], ensure_ascii=False)[1:]) in human.stdout
