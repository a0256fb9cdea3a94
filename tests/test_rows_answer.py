"""A step over rows is one entry of the answer: its summary, with its failed calls in full.

Every run below talks to the real reference store; the journal still holds every call.
"""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path
from typing import Any

from helpers import Store
from poolkit import TEST, Recorder, echo, make_pool, ops_of, run, step

from pooler.journal.sqlite.tasks import SqliteTaskJournal as Journal
from pooler.pool.model import ForEach
from pooler.run.answer import MAX_FAILURES

IMPORT = "MELBIS_AGENT_IMPORT_GOODS"
ROW_KEYS = ("total", "completed", "skipped", "failed", "in_doubt", "not_run")


def counts(**given: int | None) -> dict[str, int | None]:
    return {k: given.get(k, 0) for k in ROW_KEYS}


def write_sleeps(path: Path, values: list[int]) -> None:
    """A CSV of CmdSleep rows: a negative ``ms`` is refused by the store (``ms is from 0 to 600000.``)."""
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["n", "ms"])
        out.writerows([[n, ms] for n, ms in enumerate(values)])


def sleeps(**kw: Any) -> dict[str, Any]:
    return step(TEST, "CmdSleep", {"ms": "${row.ms}"}, name="imp", for_each=ForEach(file="rows.csv"), **kw)


def test_an_import_with_failures_counts_its_rows_and_lists_each_failure(store: Store, tmp_path: Path) -> None:
    write_sleeps(tmp_path / "rows.csv", [0, 0, 0, -1, 0, 0, 0, -2, 0, 0])
    journal = Journal(tmp_path / "j.sqlite")
    answer = run(make_pool(tmp_path, [sleeps(key="s-${row.n}")], stop_on_error=False), store,
                 tmp_path / "out", journal=journal, task_id="t")
    assert (answer["status"], answer["total"], answer["succeeded"], answer["failed"]) == ("partial", 10, 8, 2)
    (summary,) = answer["steps"]
    assert {k: summary[k] for k in ("num", "name", "unit", "command", "status", "key", "result", "message",
                                    "rows", "calls", "failures_omitted")} == {
        "num": 1, "name": "imp", "unit": TEST, "command": "CmdSleep", "status": "failed", "key": None,
        "result": False, "message": "10 rows: 8 completed, 2 failed (first at row 3)",
        "rows": counts(total=10, completed=8, failed=2), "calls": 10, "failures_omitted": 0}
    # A failed step gives no detail: references to it never run.
    assert "detail" not in summary
    assert [(f["row"], f["key"], f["status"], f["message"]) for f in summary["failures"]] == [
        (3, "s-3", "failed", "ms is from 0 to 600000."), (7, "s-7", "failed", "ms is from 0 to 600000.")]
    assert all(isinstance(f["time"]["trip"], int) for f in summary["failures"])
    # Every call is still in the journal, with its own status.
    statuses = [(c["row"], c["status"]) for c in journal.calls("t")]
    assert statuses == [(n, "failed" if n in (3, 7) else "completed") for n in range(10)]
    # The answer the journal keeps is the same small one.
    assert journal.answer("t") == answer


def test_failures_past_the_cap_are_counted_not_listed(store: Store, tmp_path: Path) -> None:
    extra = 7
    write_sleeps(tmp_path / "rows.csv", [-1] * (MAX_FAILURES + extra))
    pool = make_pool(tmp_path, [sleeps()], stop_on_error=False, mode="parallel", max_concurrency=4)
    answer = run(pool, store, tmp_path / "out")
    (summary,) = answer["steps"]
    total = MAX_FAILURES + extra
    assert summary["message"] == f"{total} rows: {total} failed (first at row 0)"
    # The lowest rows stay listed, in row order, whatever order the parallel calls ended in.
    assert [f["row"] for f in summary["failures"]] == list(range(MAX_FAILURES))
    assert summary["failures_omitted"] == extra
    assert (answer["status"], answer["failed"], answer["total"]) == ("failed", MAX_FAILURES + extra,
                                                                      MAX_FAILURES + extra)


def test_a_chunked_step_counts_calls_and_rows_apart(store: Store, tmp_path: Path) -> None:
    goods = [{"ref": f"r{n}", "sku": f"C{n}", "name": f"Goods {n}"} for n in range(7)]
    goods[4]["name"] = ""  # the chunk of rows 3-5 is refused whole
    (tmp_path / "goods.jsonl").write_text("".join(json.dumps(g) + "\n" for g in goods))
    pool = make_pool(tmp_path, [step(IMPORT, "CmdAdd", name="imp",
                                     for_each=ForEach(file="goods.jsonl", chunk=3, field="goods"))],
                     stop_on_error=False)
    answer = run(pool, store, tmp_path / "out")
    (summary,) = answer["steps"]
    assert summary["calls"] == 3
    assert summary["rows"] == counts(total=7, completed=4, failed=3)
    assert summary["message"] == "7 rows in 3 calls: 4 completed, 3 failed (first at rows 3-5)"
    (failure,) = summary["failures"]
    assert (failure["rows"], failure["message"]) == (
        [3, 5], "Row 2 of goods has no name. Nothing was imported.")
    assert summary["tables"]["goods"]["rows"] == 4
    # The answer's counts stay per call.
    assert (answer["total"], answer["succeeded"], answer["failed"]) == (3, 2, 1)


def test_a_resumed_import_counts_the_rows_it_skipped(store: Store, tmp_path: Path) -> None:
    write_sleeps(tmp_path / "rows.csv", [0, 0, -1, 0, 0])
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [sleeps(key="s-${row.n}"), echo({"slept": "@imp.slept"})])
    first = run(pool, store, tmp_path / "out", journal=journal, task_id="t")
    assert [s["message"] for s in first["steps"]] == [
        "5 rows: 2 completed, 1 failed (first at row 2), 2 not run"]
    assert first["not_run"] == 3  # the two rows and the step that refers to the import

    write_sleeps(tmp_path / "rows.csv", [0, 0, 1, 0, 0])
    # The file was mended since the task was planned: the task is planned again from it.
    again = run(pool, store, tmp_path / "out", journal=journal, task_id="t", replan=True)
    summary, after = again["steps"]
    assert (summary["status"], summary["message"]) == ("completed", "5 rows: 3 completed, 2 skipped")
    assert summary["rows"] == counts(total=5, completed=3, skipped=2)
    assert (again["succeeded"], again["skipped"], again["total"]) == (4, 2, 6)
    assert summary["detail"] == {"slept": 0}
    assert after["detail"] == {"slept": 0}
    assert [op["params"]["ms"] for op in ops_of(store, "CmdSleep")] == [0, 0, -1, 1, 0, 0]
    # A third run skips every row, and the last row's detail is read back from the journal.
    third = run(pool, store, tmp_path / "out", journal=journal, task_id="t")
    assert third["steps"][0]["message"] == "5 rows: 5 skipped"
    assert third["steps"][0]["detail"] == {"slept": 0}
    assert len(ops_of(store, "CmdSleep")) == 6


def test_a_key_repeated_within_one_run_is_sent_once(store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("sku\nA\nB\nA\n")
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [echo({"sku": "${row.sku}"}, key="k-${row.sku}",
                                     for_each=ForEach(file="rows.csv"))])
    answer = run(pool, store, tmp_path / "out", journal=journal, task_id="t")
    assert answer["steps"][0]["message"] == "3 rows: 2 completed, 1 skipped"
    assert [op["params"] for op in ops_of(store)] == [{"sku": "A"}, {"sku": "B"}]
    calls = journal.calls("t")
    assert [(c["row"], c["status"]) for c in calls] == [(0, "completed"), (1, "completed"), (2, "skipped")]
    # The skipped row names the call that did it, and its record carries that call's answer.
    assert calls[2]["step_id"] == calls[0]["step_id"] == "t-1-0-1"
    assert calls[2]["result"]["detail"] == {"sku": "A"}


def test_a_step_over_rows_not_run_has_the_summary_shape(store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("n\n1\n2\n3\n")
    pool = make_pool(tmp_path, [
        step(TEST, "CmdFail", name="bad"),
        echo({"n": "${row.n}", "x": "@bad.id"}, for_each=ForEach(file="rows.csv")),
        step(TEST, "CmdTable", {"rows": "@bad.n"}, name="tab"),
        echo({"n": "${row.n}"}, for_each=ForEach(step="tab")),
    ], stop_on_error=False)
    answer = run(pool, store, tmp_path / "out")
    _, rows, _, table = answer["steps"]
    assert rows == {"num": 2, "name": "", "unit": TEST, "command": "CmdEcho", "status": "not_run",
                    "key": None, "result": False,
                    "message": "Not run: it refers to @bad (step 1), which failed. 3 rows: 3 not run.",
                    "rows": counts(total=3, not_run=3), "calls": 0, "tables": {}, "failures": [],
                    "failures_omitted": 0}
    # The rows of a table never written were never counted.
    assert table["rows"] == counts(total=None)
    assert table["message"] == ("Not run: it refers to @tab (step 3), which was not run. rows not counted.")
    assert (answer["total"], answer["failed"], answer["not_run"]) == (6, 1, 5)


def test_a_stopped_import_says_how_many_rows_it_did_not_run(store: Store, tmp_path: Path) -> None:
    write_sleeps(tmp_path / "rows.csv", [0] * 20)
    stop = threading.Event()

    def after_five(_step: Any, result: dict[str, Any]) -> None:
        if result.get("row") == 4:
            stop.set()

    answer = run(make_pool(tmp_path, [sleeps()]), store, tmp_path / "out", stop=stop,
                 reporter=Recorder(on_finish=after_five))
    (summary,) = answer["steps"]
    # Rows landed before the stop: the step is partial, not "not run".
    assert (summary["status"], summary["message"]) == ("partial", "20 rows: 5 completed, 15 not run")
    assert summary["rows"] == counts(total=20, completed=5, not_run=15)
    assert (answer["status"], answer["interrupted"], answer["not_run"]) == ("partial", "stop", 15)


def test_a_large_detail_is_left_out_of_the_summary(store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("n\n1\n2\n")
    pool = make_pool(tmp_path, [echo({"big": "x" * 5000, "n": "${row.n}"},
                                     for_each=ForEach(file="rows.csv"))])
    (summary,) = run(pool, store, tmp_path / "out")["steps"]
    assert "detail" not in summary
    assert summary["result_omitted"] is True
    small = make_pool(tmp_path, [echo({"n": "${row.n}"}, for_each=ForEach(file="rows.csv"))],
                      include_results=False)
    (quiet,) = run(small, store, tmp_path / "out")["steps"]
    assert (quiet.get("detail"), quiet["result_omitted"], quiet["message"]) == (
        None, True, "2 rows: 2 completed")


def test_the_history_keeps_each_keyed_call_of_a_step_over_rows_whole(store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("n\n1\n2\n")
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [echo({"one": 1}, key="single"),
                                echo({"n": "${row.n}"}, key="r-${row.n}", for_each=ForEach(file="rows.csv"))])
    run(pool, store, tmp_path / "out", journal=journal, task_id="t")
    landed = {c["key"]: c for c in journal.calls("t") if c["status"] == "completed"}
    assert set(landed) == {"single", "r-1", "r-2"}
    assert landed["single"]["detail"] == {"one": 1}
    # The whole record of a row's call is in the task's history, under its key.
    (whole,) = [c for c in journal.calls("t") if c["key"] == "r-2"]
    assert (whole["row"], whole["status"], whole["step_id"], whole["detail"]) == (
        1, "completed", "t-2-1-1", {"n": "2"})
    assert [c for c in journal.calls("t") if c["key"] == "nope"] == []


def test_a_row_the_store_did_whose_tables_failed_is_asked_again_with_its_key(store: Store,
                                                                             tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("n\n1\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tables").write_text("a file where the tables folder should be\n")
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [step(TEST, "CmdTable", {"rows": 1}, key="t-${row.n}",
                                     for_each=ForEach(file="rows.csv"))])
    first = run(pool, store, out, journal=journal, task_id="t")
    (failure,) = first["steps"][0]["failures"]
    assert "The store carried the call out, but its tables could not be written" in failure["message"]
    (out / "tables").unlink()
    again = run(pool, store, out, journal=journal, task_id="t")
    assert again["steps"][0]["message"] == "1 row: 1 completed"
    # The same Idempotency-Key (no new round): the store answered from the call it carried out.
    assert [op["idempotency_key"] for op in ops_of(store, "CmdTable")] == ["t:t-1"]
    assert (out / "tables" / f"step1.{TEST}.CmdTable.rows.jsonl").read_text().count("\n") == 1
