"""Tables written from rows left in the store's answer, against the real reference store.

``pooler call``, a pool step and the MCP server's tool_run each write CmdTable answers of 0, 1, 3
and thousands of rows: the files hold exactly the bytes they held when the answer was decoded
whole, and a secret the store echoes into its rows is masked row by row on its way to the file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import ROOT, Store, answer_of, pooler
from mcpkit import checked_session

from pooler.client.answer_scan import parse
from pooler.redact import Redactor
from pooler.run.tables import TableWriter

TEST = "MELBIS_AGENT_TEST"
TOKEN = "tok-stream-5150-hidden"
SECRET = "sig-stream-7a1c-hidden"


def table_bytes(rows: int, width: int, first: int = 1) -> bytes:
    """The file CmdTable's rows make: one compact JSON object a line."""
    text = ("abcdefghijklmnopqrstuvwxyz" * (width // 26 + 1))[:width]
    return "".join(f'{{"n":{n},"text":"{text}"}}\n' for n in range(first, first + rows)).encode()


def head_of(data: bytes) -> list[str]:
    return [line[:300] for line in data.decode().splitlines()[:3]]


def call(store: Store, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return pooler("call", *args, "--store", store.url, "--out", str(tmp_path / "out"),
                  env={"POOLER_TOKEN": store.token}, cwd=tmp_path)


@pytest.mark.parametrize(("rows", "width"), [(0, 5), (1, 5), (3, 400), (4_000, 30)])
def test_pooler_call_writes_every_row_of_the_answer(store: Store, tmp_path: Path, rows: int,
                                                    width: int) -> None:
    proc = call(store, tmp_path, TEST, "CmdTable", "--params", json.dumps({"rows": rows, "width": width}),
                "--into", "nightly", "--json")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "out" / "tables" / f"{TEST}.CmdTable.rows.jsonl"
    job = tmp_path / "out" / "nightly.rows.jsonl"
    expected = table_bytes(rows, width)
    assert path.read_bytes() == expected
    assert job.read_bytes() == expected
    answer = answer_of(proc)
    assert answer["message"] == f"{rows} rows"
    assert answer["tables"] == {"rows": {"rows": rows, "file": str(path), "head": head_of(expected),
                                         "job": str(job), "job_rows": rows}}
    assert all(len(h) == min(300, len(line)) for h, line in
               zip(answer["tables"]["rows"]["head"], expected.decode().splitlines(), strict=False))


def test_pooler_call_for_a_person_names_the_file_and_its_rows(store: Store, tmp_path: Path) -> None:
    proc = call(store, tmp_path, TEST, "CmdTable", "--params", '{"rows": 3}')
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    path = tmp_path / "out" / "tables" / f"{TEST}.CmdTable.rows.jsonl"
    assert lines[:2] == ["done: 3 rows", f"table rows: 3 rows -> {path}"]
    assert re.fullmatch(r"time: server \d+ ms, module \d+ ms, trip \d+ ms", lines[2])
    assert len(lines) == 3
    assert path.read_bytes() == table_bytes(3, 20)


def write_pool(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pool.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run(store: Store, tmp_path: Path, pool: Path, token_file: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    auth = ["--token-file", str(token_file)] if token_file else []
    return pooler("run", str(pool), "--store", store.url, *auth, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "state" / "journal.sqlite"), "--json",
                  env={"POOLER_TOKEN": store.token, **(env or {})}, cwd=tmp_path)


def test_pool_steps_write_every_row(store: Store, tmp_path: Path) -> None:
    (tmp_path / "sizes.csv").write_text("rows\n2\n0\n3\n", encoding="utf-8")
    pool = write_pool(tmp_path, f"""\
pool:
  - name: big
    unit: {TEST}
    command: CmdTable
    params: {{rows: 3000, width: 12}}
    into: nightly
  - name: one
    unit: {TEST}
    command: CmdTable
    params: {{rows: 1}}
  - name: none
    unit: {TEST}
    command: CmdTable
    params: {{rows: 0}}
  - name: each
    unit: {TEST}
    command: CmdTable
    params: {{rows: "${{row.rows}}", width: 2}}
    for_each: {{file: sizes.csv}}
""")
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 0, proc.stderr
    steps = {s["name"]: s for s in answer_of(proc)["steps"]}
    tables = tmp_path / "out" / "tables"
    big, one, none = (table_bytes(3000, 12), table_bytes(1, 20), b"")
    assert (tables / f"step1.{TEST}.CmdTable.rows.jsonl").read_bytes() == big
    assert (tmp_path / "out" / "nightly.rows.jsonl").read_bytes() == big
    assert steps["big"]["tables"] == {"rows": {
        "rows": 3000, "file": str(tables / f"step1.{TEST}.CmdTable.rows.jsonl"), "head": head_of(big),
        "job": str(tmp_path / "out" / "nightly.rows.jsonl"), "job_rows": 3000}}
    assert (tables / f"step2.{TEST}.CmdTable.rows.jsonl").read_bytes() == one
    assert steps["one"]["tables"] == {"rows": {
        "rows": 1, "file": str(tables / f"step2.{TEST}.CmdTable.rows.jsonl"), "head": head_of(one)}}
    assert (tables / f"step3.{TEST}.CmdTable.rows.jsonl").read_bytes() == none
    assert steps["none"]["tables"] == {"rows": {
        "rows": 0, "file": str(tables / f"step3.{TEST}.CmdTable.rows.jsonl"), "head": []}}
    # The calls of a step over rows append to its one file, in row order.
    assert (tables / f"step4.{TEST}.CmdTable.rows.jsonl").read_bytes() == (
        table_bytes(2, 2) + table_bytes(3, 2))


def goods_with_secrets(store: Store, count: int) -> list[dict[str, Any]]:
    """Goods whose names hold the token or the secret; the store's CmdList rows, as it gives them."""
    goods = [{"ref": f"r{n}", "sku": f"S-{n}", "price": n / 4,
              "name": f"{TOKEN} ü {n}" if n % 3 == 0 else f"{SECRET}-{n}" if n % 3 == 1 else f"goods {n}"}
             for n in range(1, count + 1)]
    added = store.call("MELBIS_AGENT_IMPORT_GOODS", "CmdAdd", {"goods": goods}).json()
    assert added["data"]["result"] is True, added
    rows: list[dict[str, Any]] = store.call("MELBIS_AGENT_STORE", "CmdList").json()["data"]["tables"]["goods"]
    assert len(rows) == count
    return rows


def masked_bytes(rows: list[dict[str, Any]], *secrets: str) -> bytes:
    redactor = Redactor(secrets)
    return "".join(json.dumps(redactor.value(r), ensure_ascii=False, separators=(",", ":")) + "\n"
                   for r in rows).encode()


def test_pooler_call_masks_the_token_in_every_row(secret_store: Store, tmp_path: Path,
                                                   token_file: Path) -> None:
    rows = goods_with_secrets(secret_store, 1500)
    proc = pooler("call", "MELBIS_AGENT_STORE", "CmdList", "--store", secret_store.url, "--token-file",
                  str(token_file), "--out", str(tmp_path / "out"), "--into", "goods", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    expected = masked_bytes(rows, TOKEN)
    assert expected.count(b"***") == 500
    path = tmp_path / "out" / "tables" / "MELBIS_AGENT_STORE.CmdList.goods.jsonl"
    assert path.read_bytes() == expected
    assert (tmp_path / "out" / "goods.goods.jsonl").read_bytes() == expected
    assert answer_of(proc)["tables"]["goods"]["head"] == head_of(expected)
    assert TOKEN not in proc.stdout + proc.stderr


def test_a_pool_masks_secrets_in_every_row(secret_store: Store, tmp_path: Path, token_file: Path) -> None:
    rows = goods_with_secrets(secret_store, 1500)
    pool = write_pool(tmp_path, """\
vars:
  sig: {env: SHOP_SIG, secret: true}
pool:
  - name: list
    unit: MELBIS_AGENT_STORE
    command: CmdList
    into: goods
""")
    proc = run(secret_store, tmp_path, pool, token_file, env={"SHOP_SIG": SECRET})
    assert proc.returncode == 0, proc.stderr
    expected = masked_bytes(rows, TOKEN, SECRET)
    assert expected.count(b"***") == 1000
    path = tmp_path / "out" / "tables" / "step1.MELBIS_AGENT_STORE.CmdList.goods.jsonl"
    assert path.read_bytes() == expected
    assert (tmp_path / "out" / "goods.goods.jsonl").read_bytes() == expected
    assert answer_of(proc)["steps"][0]["tables"]["goods"]["head"] == head_of(expected)
    for secret in (TOKEN, SECRET):
        assert secret not in proc.stdout + proc.stderr
        assert secret.encode() not in (tmp_path / "state" / "journal.sqlite").read_bytes()


@pytest.mark.process
def test_mcp_tool_run_writes_and_masks_every_row(secret_store: Store, tmp_path: Path,
                                                  token_file: Path) -> None:
    rows = goods_with_secrets(secret_store, 1200)
    out = tmp_path / "out"
    import mcp_types as types  # noqa: PLC0415
    from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: PLC0415

    params = StdioServerParameters(command=sys.executable, cwd=ROOT, args=[
        "-m", "pooler", "mcp", "--store", secret_store.url, "--token-file", str(token_file),
        "--out", str(out)])
    answers: list[dict[str, Any]] = []

    async def scenario() -> None:
        with (tmp_path / "mcp-stderr.log").open("a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write), \
                    checked_session(read, write) as session:
                await session.initialize()
                for arguments in ({"unit": TEST, "command": "CmdTable", "params": {"rows": 2500, "width": 9},
                                   "into": "nightly"},
                                  {"unit": "MELBIS_AGENT_STORE", "command": "CmdList"}):
                    result = await session.call_tool("tool_run", arguments)
                    assert result.is_error is False
                    block = result.content[0]
                    assert isinstance(block, types.TextContent)
                    answers.append(json.loads(block.text))

    anyio.run(scenario)
    table, goods = answers
    big = table_bytes(2500, 9)
    assert table["tables"] == {"rows": {
        "rows": 2500, "file": str(out / "tables" / f"{TEST}.CmdTable.rows.jsonl"), "head": head_of(big),
        "job": str(out / "nightly.rows.jsonl"), "job_rows": 2500}}
    assert (out / "tables" / f"{TEST}.CmdTable.rows.jsonl").read_bytes() == big
    assert (out / "nightly.rows.jsonl").read_bytes() == big
    expected = masked_bytes(rows, TOKEN)
    assert (out / "tables" / "MELBIS_AGENT_STORE.CmdList.goods.jsonl").read_bytes() == expected
    assert goods["tables"]["goods"]["rows"] == 1200
    assert goods["tables"]["goods"]["head"] == head_of(expected)


# The writer on its own: any iterable of rows, names and rows masked as they are written


def test_the_writer_takes_rows_left_in_a_body_and_plain_lists(tmp_path: Path) -> None:
    body = json.dumps({"ok": True, "data": {"tables": {
        "t": [{"a": "x-hidden-1"}, {"b": [1, 2.5, None, True]}, "ü😀", 7, {"c": {}}],
        "name-hidden-1": [{"n": 1}],
        "e": [],
    }}}).encode()
    tables = dict(parse(body)["data"]["tables"])
    tables["plain"] = [{"k": "v"}]
    tables["one"] = {"single": "row"}
    writer = TableWriter(tmp_path / "out")
    written = writer.write("p", tables, into="job", redactor=Redactor(["x-hidden-1", "name-hidden-1"]))
    folder = tmp_path / "out" / "tables"
    assert list(written) == ["t", "***", "e", "plain", "one"]
    assert (folder / "p.t.jsonl").read_bytes() == (
        '{"a":"***"}\n{"b":[1,2.5,null,true]}\n"ü😀"\n7\n{"c":{}}\n'.encode())
    assert written["t"] == {"rows": 5, "file": str(folder / "p.t.jsonl"),
                            "head": ['{"a":"***"}', '{"b":[1,2.5,null,true]}', '"ü😀"'],
                            "job": str(tmp_path / "out" / "job.t.jsonl"), "job_rows": 5}
    assert Path(written["***"]["file"]).parent == folder
    assert Path(written["***"]["file"]).read_bytes() == b'{"n":1}\n'
    assert (folder / "p.e.jsonl").read_bytes() == b""
    assert written["e"]["rows"] == 0
    assert (folder / "p.plain.jsonl").read_bytes() == b'{"k":"v"}\n'
    assert (folder / "p.one.jsonl").read_bytes() == b'{"single":"row"}\n'
    # The same rows again, appended: the rows come out of the body afresh.
    again = writer.write("p", {"t": tables["t"]}, into="job", append=True)
    assert (again["t"]["rows"], again["t"]["job_rows"]) == (5, 10)
    assert (folder / "p.t.jsonl").read_bytes().count(b"\n") == 10
    assert (folder / "p.t.jsonl").read_bytes().endswith(b'7\n{"c":{}}\n')
    assert b"x-hidden-1" in (folder / "p.t.jsonl").read_bytes()
