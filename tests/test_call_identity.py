"""Each name a call is known by, pinned in its one form (pooler/run/identity.py), and met again in
what a real run against the reference store writes: the answer's step ids, the Idempotency-Key the
store received, and the table files under --out."""

from __future__ import annotations

from pathlib import Path

from helpers import Store, answer_of, pooler

from pooler.pool.model import Step
from pooler.run.identity import chunk_key, idempotency_header, job_call, step_id, table_prefix


def test_a_step_id_names_the_task_the_step_and_the_run() -> None:
    assert step_id("nightly", 3, None, 2) == "nightly-3-2"


def test_a_step_id_of_a_row_names_the_row_between_step_and_run() -> None:
    assert step_id("nightly", 3, 0, 1) == "nightly-3-0-1"
    assert step_id("nightly", 3, 499, 12) == "nightly-3-499-12"


def test_a_chunk_key_is_its_first_rows_key_and_the_rows_it_carries() -> None:
    assert chunk_key("import-r0001", 0, 499) == "import-r0001#0-499"
    assert chunk_key("x#1-2", 3, 4) == "x#1-2#3-4"


def test_the_idempotency_key_of_a_first_round_is_task_and_key() -> None:
    assert idempotency_header("T", "INV-100") == "T:INV-100"
    assert idempotency_header("T", "INV-100", 1) == "T:INV-100"


def test_the_idempotency_key_of_a_later_round_ends_with_its_round() -> None:
    assert idempotency_header("T", "INV-100", 2) == "T:INV-100/2"


def test_the_idempotency_key_encodes_the_characters_it_gives_a_meaning_to() -> None:
    assert idempotency_header("T:1", "INV-100/2%") == "T%3A1:INV-100%2F2%25"
    assert idempotency_header("T", "ключ 1") == "T:%D0%BA%D0%BB%D1%8E%D1%87%201"


def test_a_job_ledger_names_a_keyed_call_by_task_key_and_round() -> None:
    assert job_call("T", "INV-100", 2) == '["T", "INV-100", 2]'
    assert job_call("T", "ключ", 1) == '["T", "ключ", 1]'


def test_a_call_without_a_key_has_no_job_ledger_id() -> None:
    assert job_call("T", None, 1) is None


def test_a_table_prefix_is_the_steps_number_unit_and_command() -> None:
    step = Step(num=2, unit="MELBIS_AGENT_TEST", command="CmdTable", name="goods")
    assert table_prefix(step) == "step2.MELBIS_AGENT_TEST.CmdTable"


POOL = """\
pool:
  - {name: one, unit: MELBIS_AGENT_TEST, command: CmdEcho, key: "INV/7", params: {step: one}}
  - {name: made, unit: MELBIS_AGENT_TEST, command: CmdTable, params: {rows: 1}}
  - name: each
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    key: "r-${row.n}"
    for_each: {file: rows.jsonl}
    params: {n: "${row.n}"}
"""


def test_a_run_names_its_calls_headers_and_tables_as_the_identity_module_does(
        store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "ids.yaml"
    pool.write_text(POOL, encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text('{"n": 1}\n{"n": 2}\n', encoding="utf-8")
    out = tmp_path / "out"
    proc = pooler("run", str(pool), "--store", store.url, "--json", "--out", str(out), "--task", "N",
                  "--journal", str(tmp_path / "journal.sqlite"),
                  env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(tmp_path / "state")})
    assert proc.returncode == 0, proc.stderr
    steps = answer_of(proc)["steps"]
    assert steps[0]["step_id"] == step_id("N", 1, None, 1) == "N-1-1"
    headers = [op["idempotency_key"] for op in store.ops() if op["command"] == "CmdEcho"]
    assert headers == [idempotency_header("N", "INV/7"), idempotency_header("N", "r-1"),
                       idempotency_header("N", "r-2")]
    assert headers[0] == "N:INV%2F7"
    made = Step(num=2, unit="MELBIS_AGENT_TEST", command="CmdTable")
    assert [p.name for p in (out / "tables").iterdir()] == [f"{table_prefix(made)}.rows.jsonl"]
