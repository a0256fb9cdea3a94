"""A task is planned once: its first run records its rows and the digests of its files, every later
run takes its rows from there, a file changed since is told and refused, and ``--replan`` plans
what is not done yet from the files as they are now, every row reaching the store once.

Against the real reference store: its ops (CmdOps) say what it carried out.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import STORE_TOKEN, Store, answer_of, pooler
from poolkit import echo, make_pool
from poolkit import run as kit_run
from sharedkit import journal_of

from pooler.client.http import ToolRunClient
from pooler.errors import JournalError
from pooler.journal.sqlite.tasks import SqliteTaskJournal
from pooler.mcp.session import pool_task_id, run_session_pool
from pooler.pool.compiler import data_of
from pooler.pool.model import ForEach, Pool
from pooler.run.config import RunConfig

CHUNKED = """\
pool:
  - name: imp
    unit: MELBIS_AGENT_IMPORT_GOODS
    command: CmdAdd
    for_each: {file: goods.csv, chunk: 5, field: goods}
    key: imp-${row.ref}
"""

PER_ROW = """\
pool:
  - name: echo
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv}
    key: echo-${row.ref}
    params: {ref: "${row.ref}", name: "${row.name}"}
"""

UNKEYED = """\
pool:
  - name: echo
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {file: goods.csv}
    params: {ref: "${row.ref}"}
"""


def write_goods(path: Path, refs: list[str], names: dict[str, str] | None = None) -> None:
    names = names or {}
    lines = ["ref,sku,name,price"] + [f"{r},SKU-{r},{names.get(r, 'item ' + r)},1.00" for r in refs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def refs(count: int) -> list[str]:
    return [f"R{n:02d}" for n in range(count)]


def setup(tmp_path: Path, pool_text: str, goods: list[str]) -> Path:
    pool = tmp_path / "pool.yaml"
    pool.write_text(pool_text, encoding="utf-8")
    write_goods(tmp_path / "goods.csv", goods)
    return pool


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The journal the test's task lives in: a SQLite file, or a PostgreSQL database."""
    return journal_of(request.param, request, tmp_path, "journal.sqlite")


def run(store: Store, where: str, tmp_path: Path, pool: Path, *extra: str
        ) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", where, *extra,
                  env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(tmp_path / "state")})


def imported(store: Store) -> list[str]:
    """The ref of every row the import tool carried out, in order, repeats kept."""
    return [row["ref"] for op in store.ops() if op["unit"] == "MELBIS_AGENT_IMPORT_GOODS"
            for row in op["params"]["goods"]]


def echoed(store: Store) -> list[tuple[str, str | None]]:
    return [(op["params"]["ref"], op["params"].get("name")) for op in store.ops()
            if op["command"] == "CmdEcho"]


def test_a_chunked_task_whose_file_grew_is_refused_then_replanned_with_every_row_once(
        where: str, store: Store, tmp_path: Path) -> None:
    """Failure 5 of the issue: 3 rows inserted after the second row of a sampled chunked task."""
    first = refs(20)
    pool = setup(tmp_path, CHUNKED, first)
    sample = run(store, where, tmp_path, pool, "--sample", "10", "--task", "T")
    assert sample.returncode == 0, sample.stderr
    assert plan_of(where) == "4 calls planned: 2 completed, 2 not run"
    now = [*first[:2], "N1", "N2", "N3", *first[2:]]
    write_goods(tmp_path / "goods.csv", now)
    before = len(store.ops())
    again = run(store, where, tmp_path, pool, "--task", "T")
    assert again.returncode == 2
    assert again.stderr == (
        "pooler: goods.csv changed since task T was planned (20 rows then, 23 now) - run it with "
        "--replan to plan what task T has not done yet from the files as they are now, restore the "
        "files, or start a new task.\n"
        "pooler: refused before the first step; nothing was sent.\n")
    assert len(store.ops()) == before
    replanned = run(store, where, tmp_path, pool, "--task", "T", "--replan")
    assert replanned.returncode == 0, replanned.stderr
    answer = answer_of(replanned)
    assert answer["status"] == "completed"
    assert answer["steps"][0]["rows"] == {"total": 23, "completed": 13, "skipped": 10, "failed": 0,
                                          "in_doubt": 0, "not_run": 0}
    sent = imported(store)
    assert Counter(sent) == Counter(now)
    # The new rows go in a chunk of their own: no chunk reaches over the rows done before.
    keys = [op["idempotency_key"] for op in store.ops() if op["unit"] == "MELBIS_AGENT_IMPORT_GOODS"]
    assert keys == ["T:imp-R00#0-4", "T:imp-R05#5-9", "T:imp-N1#2-4", "T:imp-R10#13-17", "T:imp-R15#18-22"]
    listed = json.loads(pooler("runs", "--journal", where, "--json").stdout)
    assert [(t["id"], t["status"]) for t in listed["tasks"]] == [("T", "completed")]
    # The calls done under the first plan count as completed in the new one: 2 chunks, then 3.
    assert plan_of(where) == "5 calls planned: 5 completed"


def plan_of(where: str) -> str:
    """What ``pooler show`` says of task T's plan."""
    shown = pooler("show", "T", "--journal", where)
    assert shown.returncode == 0, shown.stderr
    last = shown.stdout.splitlines()[-1]
    assert last.startswith("the task's plan: ")
    return last.removeprefix("the task's plan: ")


def test_a_later_run_takes_its_rows_from_the_plan_not_from_the_file(
        where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(6))
    sample = run(store, where, tmp_path, pool, "--sample", "2", "--task", "T")
    assert sample.returncode == 0, sample.stderr
    (tmp_path / "goods.csv").unlink()
    rest = run(store, where, tmp_path, pool, "--task", "T")
    assert rest.returncode == 0, rest.stderr
    assert "pooler: goods.csv is not there any more; task T takes its rows from its plan.\n" in rest.stderr
    assert [ref for ref, _ in echoed(store)] == refs(6)


def test_a_missing_file_without_a_plan_is_still_refused(where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(2))
    (tmp_path / "goods.csv").unlink()
    refused = run(store, where, tmp_path, pool, "--task", "NEW")
    assert refused.returncode == 2
    assert "No such file:" in refused.stderr
    assert echoed(store) == []


def test_a_changed_pool_file_is_told_and_refused(where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(3))
    assert run(store, where, tmp_path, pool, "--sample", "1", "--task", "T").returncode == 0
    pool.write_text(PER_ROW.replace("${row.name}", "x ${row.name}"), encoding="utf-8")
    again = run(store, where, tmp_path, pool, "--task", "T")
    assert again.returncode == 2
    assert again.stderr.startswith("pooler: the pool file pool.yaml changed since task T was planned - "
                                   "run it with --replan")
    assert len(echoed(store)) == 1


def test_an_edited_file_of_as_many_rows_says_its_content_differs(
        where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(3))
    assert run(store, where, tmp_path, pool, "--sample", "1", "--task", "T").returncode == 0
    write_goods(tmp_path / "goods.csv", refs(3), {"R01": "edited"})
    again = run(store, where, tmp_path, pool, "--resume")
    assert again.returncode == 2
    assert again.stderr.startswith("pooler: goods.csv changed since task T was planned (3 rows then and "
                                   "now, their content differs) - run it with --replan")


def test_replan_of_per_row_keys_skips_done_rows_sends_new_and_edited_and_drops_removed(
        where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(6))
    assert run(store, where, tmp_path, pool, "--sample", "3", "--task", "T").returncode == 0
    # R01 (done) and R04 (not done) edited, R03 removed, N1 inserted.
    write_goods(tmp_path / "goods.csv", ["R00", "R01", "N1", "R02", "R04", "R05"],
                {"R01": "edited", "R04": "edited"})
    replanned = run(store, where, tmp_path, pool, "--task", "T", "--replan")
    assert replanned.returncode == 0, replanned.stderr
    assert echoed(store) == [("R00", "item R00"), ("R01", "item R01"), ("R02", "item R02"),
                             ("N1", "item N1"), ("R04", "edited"), ("R05", "item R05")]
    rows = answer_of(replanned)["steps"][0]["rows"]
    assert (rows["total"], rows["completed"], rows["skipped"]) == (6, 3, 3)


def test_replan_of_a_chunked_step_leaves_out_removed_rows_and_sends_edited_ones_not_done(
        where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, CHUNKED, refs(12))
    assert run(store, where, tmp_path, pool, "--sample", "5", "--task", "T").returncode == 0
    now = [r for r in refs(12) if r not in ("R02", "R07")]
    write_goods(tmp_path / "goods.csv", now, {"R08": "edited"})
    replanned = run(store, where, tmp_path, pool, "--task", "T", "--replan")
    assert replanned.returncode == 0, replanned.stderr
    sent = imported(store)
    assert sent == [*refs(5), "R05", "R06", "R08", "R09", "R10", "R11"]
    goods = store.call("MELBIS_AGENT_STORE", "CmdList").json()["data"]["tables"]["goods"]
    assert {g["name"] for g in goods if g["sku"] == "SKU-R08"} == {"edited"}


def test_replan_is_refused_for_an_unkeyed_step_that_sent_rows(
        where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, UNKEYED, refs(4))
    assert run(store, where, tmp_path, pool, "--sample", "2", "--task", "T").returncode == 0
    write_goods(tmp_path / "goods.csv", ["N1", *refs(4)])
    refused = run(store, where, tmp_path, pool, "--task", "T", "--replan")
    assert refused.returncode == 2
    assert refused.stderr == (
        "pooler: --replan refused for task T: step 1 (echo) has no key, so the rows it sent (2 calls) "
        "cannot be told apart from new ones and a new plan could send them again - give the step a key, "
        "or start a new task.\n"
        "pooler: refused before the first step; nothing was sent.\n")
    assert len(echoed(store)) == 2


def test_replan_needs_a_task(where: str, store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(2))
    refused = run(store, where, tmp_path, pool, "--replan")
    assert refused.returncode == 2
    assert refused.stderr == ("pooler: --replan plans a task again: give it with --task ID or --resume.\n"
                              "pooler: refused before the first step; nothing was sent.\n")


def test_the_plan_is_recorded_whole_for_a_sample_and_not_at_all_by_a_dry_run(
        store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, CHUNKED, refs(12))
    journal = str(tmp_path / "journal.sqlite")
    assert run(store, journal, tmp_path, pool, "--dry-run").returncode == 0
    with SqliteTaskJournal(journal) as tasks:
        assert tasks.tasks() == []
    assert run(store, journal, tmp_path, pool, "--sample", "5", "--task", "T").returncode == 0
    assert plan_of(journal) == "3 calls planned: 1 completed, 2 not run"
    with SqliteTaskJournal(journal) as tasks:
        files = (tasks.shared("T") or {})["files"]
    assert [(f["num"], f["name"], f["rows"], f["chunk"]) for f in files] == [
        (0, "pool.yaml", None, None), (1, "goods.csv", 12, 5)]
    # Every row is in the plan: the rest is sent without the file.
    (tmp_path / "goods.csv").unlink()
    rest = run(store, journal, tmp_path, pool, "--task", "T")
    assert rest.returncode == 0, rest.stderr
    assert imported(store) == refs(12)
    assert plan_of(journal) == "3 calls planned: 3 completed"


def test_each_pool_of_a_session_is_a_task_of_its_own_whose_keys_its_other_pools_skip(
        store: Store, tmp_path: Path) -> None:
    """The MCP server's tool_pool calls: one session, a task each pool, over files of their own."""
    (tmp_path / "a.csv").write_text("ref\nA1\nA2\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text("ref\nB1\nA1\n", encoding="utf-8")
    over = {"name": "echo", "params": {"ref": "${row.ref}"}, "key": "e-${row.ref}"}
    first = make_pool(tmp_path, [echo(**over, for_each=ForEach(file="a.csv"))])
    second = make_pool(tmp_path, [echo(**over, for_each=ForEach(file="b.csv"))])
    with SqliteTaskJournal(tmp_path / "j.sqlite") as journal:
        done = session_run(first, store, tmp_path / "out", journal, "S")
        again = session_run(second, store, tmp_path / "out", journal, "S")
        # Run under the first pool's task, the second pool is told: a task runs the pool it planned.
        with pytest.raises(JournalError) as refused:
            kit_run(second, store, tmp_path / "out", journal=journal, task_id=pool_task_id("S", first))
        pool_tasks = sorted(t.id for t in journal.tasks())
    assert (done["status"], done["task"], again["task"]) == ("completed", "S", "S")
    assert again["steps"][0]["rows"]["skipped"] == 1
    assert [ref for ref, _ in echoed(store)] == ["A1", "A2", "B1"]
    assert [op["idempotency_key"] for op in store.ops() if op["command"] == "CmdEcho"] == [
        "S:e-A1", "S:e-A2", "S:e-B1"]
    assert pool_tasks == sorted([pool_task_id("S", first), pool_task_id("S", second)])
    # (Its data file is told as changed: a runner of a task need not have the file where it was.)
    told = refused.value.message
    assert told.startswith(f"a.csv changed since task {pool_task_id('S', first)} was planned")
    assert told.endswith("restore the files, or start a new task.")


def session_run(pool: Pool, store: Store, out: Path, journal: SqliteTaskJournal, session: str
                ) -> dict[str, Any]:
    """A pool run as a tool_pool call of the MCP session ``session`` runs it."""
    with ToolRunClient(store.url, STORE_TOKEN) as client:
        plan = data_of(pool, {}, None)
        return run_session_pool(plan, client, RunConfig(out=out, task_id=session, checked=True), journal)


#: The refusal of a plan whose data row holds a secret's value, on every journal.
SECRET_ROW = ("row {row} of goods.csv of step {step} holds the value of a secret (the token or a secret "
              "variable), and a task keeps its rows in the journal, which never holds a secret - keep the "
              "secret out of the data file.")


def test_a_step_whose_rows_hold_a_secret_is_refused_before_anything_is_sent_and_the_journal_keeps_none(
        store: Store, tmp_path: Path) -> None:
    pool = setup(tmp_path, PER_ROW, refs(3))
    write_goods(tmp_path / "goods.csv", refs(3), {"R01": store.token})
    journal = str(tmp_path / "journal.sqlite")
    first = run(store, journal, tmp_path, pool, "--sample", "2", "--task", "T")
    assert first.returncode == 2
    assert SECRET_ROW.format(row=2, step=1) in first.stderr
    assert first.stderr.endswith("pooler: refused before the first step; nothing was sent.\n")
    assert store.token not in first.stderr
    assert store.token.encode() not in (tmp_path / "journal.sqlite").read_bytes()
    with SqliteTaskJournal(journal) as tasks:
        assert tasks.task("T") is None
    assert echoed(store) == []


def test_a_row_after_the_sample_that_holds_a_secret_is_refused_before_anything_is_sent(
        where: str, store: Store, tmp_path: Path) -> None:
    # The rows after a sample are planned too (beyond it): the same refusal, naming the row.
    pool = setup(tmp_path, PER_ROW, refs(5))
    write_goods(tmp_path / "goods.csv", refs(5), {"R03": store.token})
    first = run(store, where, tmp_path, pool, "--sample", "1", "--task", "T")
    assert first.returncode == 2
    assert SECRET_ROW.format(row=4, step=1) in first.stderr
    assert first.stderr.endswith("pooler: refused before the first step; nothing was sent.\n")
    assert store.token not in first.stderr
    assert echoed(store) == []


def test_runs_and_show_count_a_tasks_plan_in_calls_as_its_run_does(
        where: str, store: Store, tmp_path: Path) -> None:
    # A call, a step over 12 rows, 12 rows in chunks of 5, and a step over the chunks' table:
    # 28 calls carrying 37 rows and more.
    pool = setup(tmp_path, CHUNKED.replace("pool:\n", (
        "pool:\n"
        "  - {name: one, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {a: 1}}\n"
        "  - {name: each, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {ref: '${row.ref}'},\n"
        "     for_each: {file: goods.csv}}\n")) + (
        "  - {name: over, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {id: '${row.id}'},\n"
        "     for_each: {step: imp, table: goods}}\n"), refs(12))
    done = run(store, where, tmp_path, pool, "--task", "T")
    assert done.returncode == 0, done.stderr
    assert answer_of(done)["total"] == 28
    assert plan_of(where) == "28 calls planned: 28 completed"
    listed = pooler("runs", "--journal", where)
    assert "  runs 1  28 calls planned: 28 completed  " in listed.stdout
    task = json.loads(pooler("runs", "--journal", where, "--json").stdout)["tasks"][0]
    assert task["plan"] == {"planned": 28, "completed": 28, "failed": 0, "in_doubt": 0, "skipped": 0,
                            "not_run": 0}
