"""Sequential runs against the real store: order, stops, tables, answer shape and its limits."""

from __future__ import annotations

import csv
import dataclasses
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import Store
from poolkit import TEST, Recorder, echo, make_pool, ops_of, run, statuses, step

from pooler.errors import InputError, JournalError
from pooler.journal.sqlite.tasks import SqliteTaskJournal as Journal
from pooler.pool.loader import load_pool, load_pool_value
from pooler.pool.model import ForEach, Retry, Step
from pooler.pool.variables import Variables
from pooler.redact import Redactor
from pooler.run.config import StopSignal, step_plan

IMPORT = "MELBIS_AGENT_IMPORT_GOODS"


def test_the_answer_has_the_contracts_shape(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [echo({"a": 1}, name="one"), echo({"b": "@one.a"}, name="two")])
    answer = run(pool, store, tmp_path / "out")
    assert list(answer) == ["result", "status", "total", "succeeded", "failed", "skipped", "not_run",
                            "calls_in_doubt", "in_doubt", "task", "steps", "time"]
    assert (answer["result"], answer["status"], answer["total"], answer["succeeded"], answer["failed"],
            answer["skipped"], answer["not_run"], answer["in_doubt"]) == (
        True, "completed", 2, 2, 0, 0, 0, [])
    first = answer["steps"][0]
    assert list(first) == ["num", "name", "unit", "command", "status", "key", "step_id", "result",
                           "message", "detail", "tables", "files", "time"]
    assert first["step_id"] == f"{answer['task']}-1-1"
    assert (first["result"], first["message"], first["detail"], first["tables"], first["files"]) == (
        True, "The fields as received", {"a": 1}, {}, [])
    assert set(first["time"]) == {"server", "module", "trip"}
    assert all(isinstance(v, int) for v in first["time"].values())
    assert isinstance(answer["time"]["trip"], int)
    assert answer["time"]["trip"] >= first["time"]["trip"]


def test_debug_adds_sql_to_the_time(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [step("MELBIS_AGENT_CURRENCY", "CmdList", debug=True)])
    entry = run(pool, store, tmp_path / "out")["steps"][0]
    assert {"server", "module", "trip", "sql", "sql_ms"} <= set(entry["time"])


def test_a_refusal_stops_the_pool_and_nothing_is_sent_after_it(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [echo({"a": 1}), step(TEST, "CmdFail"), echo({"b": 2})])
    answer = run(pool, store, tmp_path / "out")
    assert statuses(answer) == [(1, None, "completed"), (2, None, "failed")]
    assert answer["steps"][-1]["message"] == "CmdFail refuses, as it always does."
    assert (answer["result"], answer["status"], answer["succeeded"], answer["failed"], answer["not_run"]) == (
        False, "partial", 1, 1, 1)
    assert [op["command"] for op in ops_of(store)] == ["CmdEcho", "CmdFail"]


def test_a_crash_stops_the_pool_in_doubt_with_its_text(store: Store, tmp_path: Path) -> None:
    """A crash's text does not say whether the command ran: the call is in doubt, not failed."""
    pool = make_pool(tmp_path, [step(TEST, "CmdCrash"), echo({"b": 2})])
    answer = run(pool, store, tmp_path / "out")
    assert statuses(answer) == [(1, None, "in_doubt")]
    entry = answer["steps"][0]
    assert entry["message"] == "MELBIS_AGENT_TEST\\CmdCrash failed: CmdCrash broke off, as it always does"
    assert "detail" not in entry
    assert "trip" in entry["time"]
    assert (answer["status"], answer["not_run"]) == ("failed", 1)
    assert [op["command"] for op in ops_of(store)] == ["CmdCrash"]


def test_without_stop_on_error_later_steps_run_but_not_those_that_need_the_failed_one(
        store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [
        step(TEST, "CmdFail", name="bad"),
        echo({"x": "@bad.id"}, name="needs"),
        echo({"y": "@needs.x"}),
        echo({"z": 3}),
    ], stop_on_error=False)
    journal = Journal(tmp_path / "j.sqlite")
    answer = run(pool, store, tmp_path / "out", journal=journal)
    assert statuses(answer) == [(1, None, "failed"), (2, None, "not_run"), (3, None, "not_run"),
                                (4, None, "completed")]
    assert answer["steps"][1] == {"num": 2, "name": "needs", "unit": TEST, "command": "CmdEcho",
                                  "status": "not_run", "key": None, "result": False,
                                  "message": "Not run: it refers to @bad (step 1), which failed."}
    assert answer["steps"][2]["message"] == "Not run: it refers to @needs (step 2), which was not run."
    assert (answer["status"], answer["succeeded"], answer["failed"], answer["not_run"]) == (
        "partial", 1, 1, 2)
    assert [op["params"] for op in ops_of(store, "CmdEcho")] == [{"z": 3}]
    # Every call has exactly one status in the journal (recorded as each ends: step 4 may end
    # before the steps it does not wait for are found not runnable).
    assert sorted((c["num"], c["status"]) for c in journal.calls(answer["task"])) == [
        (1, "failed"), (2, "not_run"), (3, "not_run"), (4, "completed")]


def test_tables_are_written_per_step_with_head_and_into_jobs(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pool = make_pool(tmp_path, [
        step(TEST, "CmdTable", {"rows": 5, "width": 400}, into="report"),
        step(TEST, "CmdTable", {"rows": 2, "width": 3}, into="report"),
    ])
    answer = run(pool, store, out)
    first, second = answer["steps"]
    table = first["tables"]["rows"]
    path = out / "tables" / "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl"
    assert table["file"] == str(path)
    assert table["rows"] == 5
    assert len(table["head"]) == 3
    assert all(len(h) == 300 for h in table["head"])
    assert table["head"][0] == json.dumps({"n": 1, "text": ("abcdefghijklmnopqrstuvwxyz" * 16)[:400]},
                                          separators=(",", ":"))[:300]
    lines = path.read_text().splitlines()
    assert [json.loads(line)["n"] for line in lines] == [1, 2, 3, 4, 5]
    assert second["tables"]["rows"]["file"] == str(out / "tables" / f"step2.{TEST}.CmdTable.rows.jsonl")
    assert second["tables"]["rows"]["head"] == ['{"n":1,"text":"abc"}', '{"n":2,"text":"abc"}']
    assert (first["tables"]["rows"]["job_rows"], second["tables"]["rows"]["job_rows"]) == (5, 7)
    assert len((out / "report.rows.jsonl").read_text().splitlines()) == 7


def test_a_new_task_clears_the_step_tables_of_the_run_before(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(make_pool(tmp_path, [echo(), step(TEST, "CmdTable", {"rows": 1})]), store, out)
    assert (out / "tables" / "step2.MELBIS_AGENT_TEST.CmdTable.rows.jsonl").exists()
    run(make_pool(tmp_path, [step(TEST, "CmdTable", {"rows": 1})]), store, out)
    assert sorted(p.name for p in (out / "tables").iterdir()) == [f"step1.{TEST}.CmdTable.rows.jsonl"]


def test_a_task_run_again_keeps_its_step_tables_unless_told_to_clear_them(store: Store,
                                                                         tmp_path: Path) -> None:
    out = tmp_path / "out"
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [echo(), step(TEST, "CmdTable", {"rows": 1}, key="table"),
                                step(TEST, "CmdFail")])
    run(pool, store, out, journal=journal, task_id="t")
    table = out / "tables" / f"step2.{TEST}.CmdTable.rows.jsonl"
    again = run(pool, store, out, journal=journal, task_id="t")
    # The key the run again skips sends nothing: its table, where its entry says it is, stays.
    assert statuses(again)[1] == (2, None, "skipped")
    assert again["steps"][1]["tables"]["rows"]["file"] == str(table)
    assert sorted(p.name for p in (out / "tables").iterdir()) == [table.name]
    assert [op["command"] for op in ops_of(store, "CmdTable")] == ["CmdTable"]
    # A caller whose every run is a new pool under one task (tool_pool) clears them.
    run(pool, store, out, journal=journal, task_id="t", clear_tables=True)
    assert sorted(p.name for p in (out / "tables").iterdir()) == []


def test_a_big_result_is_omitted_and_kept_in_the_journal(store: Store, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [echo({"text": "x" * 5000}), echo({"text": "y" * 3000})])
    answer = run(pool, store, tmp_path / "out", journal=journal)
    big, small = answer["steps"]
    assert big["result_omitted"] is True
    assert "detail" not in big
    assert "tables" not in big
    assert list(big) == ["num", "name", "unit", "command", "status", "key", "step_id", "result", "message",
                         "result_omitted", "time"]
    assert small["detail"] == {"text": "y" * 3000}
    assert "result_omitted" not in small
    recorded = journal.calls(answer["task"])
    assert recorded[0]["detail"] == {"text": "x" * 5000}
    assert recorded[0]["result"]["detail"] == {"text": "x" * 5000}


def test_the_answer_inlines_at_most_256_kb_of_results(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [echo({"text": "z" * 3900}) for _ in range(80)])
    answer = run(pool, store, tmp_path / "out")
    inlined = [e for e in answer["steps"] if "detail" in e]
    omitted = [e for e in answer["steps"] if e.get("result_omitted")]
    assert len(inlined) + len(omitted) == 80
    size = sum(len(json.dumps({k: e[k] for k in ("detail", "tables", "files")}, separators=(",", ":")))
               for e in inlined)
    assert 256 * 1024 - 4096 < size < 256 * 1024
    # The budget is spent in step order: the first calls are inlined, the last ones are not.
    assert [e["num"] for e in inlined] == list(range(1, len(inlined) + 1))


def test_include_results_false_omits_every_result(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [echo({"a": 1}), step(TEST, "CmdTable", {"rows": 2})], include_results=False)
    answer = run(pool, store, tmp_path / "out")
    assert all(e["result_omitted"] is True for e in answer["steps"])
    assert all("detail" not in e and "tables" not in e for e in answer["steps"])
    assert (tmp_path / "out" / "tables" / "step2.MELBIS_AGENT_TEST.CmdTable.rows.jsonl").exists()


def test_secrets_never_reach_the_answer_or_the_journal(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    pool = make_pool(tmp_path, [echo({"token": "${pw}"}, key="k-${pw}")])
    answer = run(pool, store, tmp_path / "out", journal=journal, variables={"pw": "s3cret-word"},
                 redactor=Redactor(["s3cret-word"]))
    assert answer["result"] is True
    assert answer["steps"][0]["detail"] == {"token": "***"}
    assert answer["steps"][0]["key"] == "k-***"
    journal.close()
    for name in ("j.sqlite", "j.sqlite-wal"):
        if (tmp_path / name).exists():
            assert b"s3cret-word" not in (tmp_path / name).read_bytes()
    # The store itself got the real value.
    assert ops_of(store)[0]["params"] == {"token": "s3cret-word"}


def test_the_reporter_hears_every_event(store: Store, tmp_path: Path) -> None:
    recorder = Recorder()
    pool = make_pool(tmp_path, [echo(), echo(), step(TEST, "CmdFail"), echo()])
    answer = run(pool, store, tmp_path / "out", reporter=recorder)
    assert recorder.events[0] == ("pool_started", answer["task"], 4)
    assert recorder.of("step_started") == [("step_started", 1, 1), ("step_started", 2, 2),
                                           ("step_started", 3, 3)]
    # Each call that left tells its answer's kind and its tries, before its status is counted.
    assert recorder.of("call_ended") == [("call_ended", 1, 1, "done", 1), ("call_ended", 2, 2, "done", 1),
                                         ("call_ended", 3, 3, "refused", 1)]
    assert recorder.events.index(("call_ended", 3, 3, "refused", 1)) < recorder.events.index(
        ("step_finished", 3, "failed"))
    assert recorder.of("step_finished") == [("step_finished", 1, "completed"),
                                            ("step_finished", 2, "completed"),
                                            ("step_finished", 3, "failed")]
    assert recorder.events[-1] == ("pool_finished", "partial")


def test_a_reporter_written_before_call_ended_existed_still_hears_the_rest(
        store: Store, tmp_path: Path) -> None:
    class Older:
        """The events a reporter had before call_ended was added."""

        def __init__(self) -> None:
            self.finished: list[str] = []

        def pool_started(self, pool: Any, task_id: str, total: int) -> None:
            return None

        def step_started(self, step: Any, call: int) -> None:
            return None

        def step_finished(self, step: Any, result: dict[str, Any]) -> None:
            self.finished.append(result["status"])

        def rows_progress(self, step: Any, done: int, total: int | None) -> None:
            return None

        def calls_planned(self, total: int) -> None:
            return None

        def pool_finished(self, answer: dict[str, Any]) -> None:
            return None

    older = Older()
    pool = make_pool(tmp_path, [echo(), step(TEST, "CmdFail")])
    answer = run(pool, store, tmp_path / "out", reporter=older)
    assert answer["status"] == "partial"
    assert older.finished == ["completed", "failed"]


def test_a_store_that_cannot_be_reached_is_tried_three_times_then_fails(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    recorder = Recorder()
    pool = make_pool(tmp_path, [echo({"a": 1}, retry=Retry(attempts=3, backoff_ms=1)), echo()])
    answer = run(pool, f"http://127.0.0.1:{port}", tmp_path / "out", reporter=recorder)
    entry = answer["steps"][0]
    assert list(entry) == ["num", "name", "unit", "command", "status", "key", "result", "message"]
    assert entry["status"] == "failed"
    assert entry["message"].startswith(f"cannot reach the store at http://127.0.0.1:{port}")
    assert (answer["status"], answer["failed"], answer["not_run"]) == ("failed", 1, 1)


def test_a_stop_before_the_run_sends_nothing(store: Store, tmp_path: Path) -> None:
    stop = StopSignal()
    stop.request("SIGTERM")
    answer = run(make_pool(tmp_path, [echo(), echo()]), store, tmp_path / "out", stop=stop)
    assert (answer["status"], answer["not_run"], answer["steps"], answer["interrupted"]) == (
        "failed", 2, [], "SIGTERM")
    assert ops_of(store) == []


def test_a_stop_during_the_run_lets_no_new_call_start(store: Store, tmp_path: Path) -> None:
    stop = threading.Event()
    recorder = Recorder(on_finish=lambda step, entry: stop.set() if step.num == 2 else None)
    pool = make_pool(tmp_path, [echo({"n": n}) for n in range(1, 6)])
    answer = run(pool, store, tmp_path / "out", reporter=recorder, stop=stop)
    assert statuses(answer) == [(1, None, "completed"), (2, None, "completed")]
    assert (answer["status"], answer["not_run"], answer["interrupted"]) == ("partial", 3, "stop")
    assert [op["params"] for op in ops_of(store)] == [{"n": 1}, {"n": 2}]


def test_variables_and_templates_fill_params_and_keep_types(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [echo({"n": "${n}", "text": "n is ${n}", "list": "${items}"}, name="a")])
    answer = run(pool, store, tmp_path / "out", variables={"n": 3, "items": [1, 2]})
    assert answer["steps"][0]["detail"] == {"n": 3, "text": "n is 3", "list": [1, 2]}
    # The resolved variables as values.resolve_variables gives them serve as well.
    again = run(pool, store, tmp_path / "out", variables=Variables({"n": 4, "items": []}))
    assert again["steps"][0]["detail"] == {"n": 4, "text": "n is 4", "list": []}


def test_a_refusal_is_never_sent_again(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [step(TEST, "CmdFail", retry=Retry(attempts=5, backoff_ms=1))])
    answer = run(pool, store, tmp_path / "out")
    assert statuses(answer) == [(1, None, "failed")]
    assert len(ops_of(store)) == 1


def test_jsonl_files_in_params_are_read_beside_the_pool(store: Store, tmp_path: Path) -> None:
    (tmp_path / "goods.jsonl").write_text('{"ref": "a", "sku": "S1", "name": "One", "price": 1.5}\n'
                                          '{"ref": "b", "sku": "S2", "name": "Two"}\n')
    pool = make_pool(tmp_path, [step(IMPORT, "CmdAdd", {"goods": {"file": "goods.jsonl"}})])
    answer = run(pool, store, tmp_path / "out")
    assert answer["result"] is True
    assert answer["steps"][0]["tables"]["goods"]["rows"] == 2
    assert [g["sku"] for g in ops_of(store)[0]["params"]["goods"]] == ["S1", "S2"]


def test_a_pool_built_in_memory_reads_its_files_from_the_loaders_base(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "store-folder"
    folder.mkdir()
    (folder / "goods.jsonl").write_text('{"ref": "a", "sku": "S1", "name": "One"}\n')
    (folder / "rows.csv").write_text("n\n1\n2\n")
    pool = load_pool_value({"pool": [
        {"unit": IMPORT, "command": "CmdAdd", "params": {"goods": {"file": "goods.jsonl"}}},
        {"unit": TEST, "command": "CmdEcho", "params": {"n": "${row.n}"}, "for_each": {"file": "rows.csv"}},
    ]}, file="<tool_pool>", base=folder)
    answer = run(pool, store, tmp_path / "out")
    assert answer["result"] is True, answer
    assert [g["sku"] for g in ops_of(store, "CmdAdd")[0]["params"]["goods"]] == ["S1"]
    assert [op["params"] for op in ops_of(store, "CmdEcho")] == [{"n": "1"}, {"n": "2"}]


def test_a_pool_through_a_symlinked_folder_is_the_same_pool(store: Store, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    (real / "pool.json").write_text(json.dumps({"pool": [
        {"key": "a", "unit": TEST, "command": "CmdEcho", "params": {"n": 1}},
        {"key": "b", "unit": TEST, "command": "CmdFail"}]}))
    journal = Journal(tmp_path / "j.sqlite")
    first = run(load_pool(real / "pool.json"), store, tmp_path / "out", journal=journal, task_id="t")
    again = run(load_pool(tmp_path / "link" / "pool.json"), store, tmp_path / "out", journal=journal,
                task_id="t")
    assert statuses(first) == [(1, None, "completed"), (2, None, "failed")]
    assert statuses(again) == [(1, None, "skipped"), (2, None, "failed")]
    resumed = run(load_pool(tmp_path / "link" / ".." / "link" / "pool.json"), store, tmp_path / "out",
                  journal=journal, resume=True)
    assert resumed["task"] == "t"
    task = journal.task("t")
    assert task is not None
    assert (task.pool_file, task.runs) == (str((real / "pool.json").resolve()), 3)


def test_a_template_naming_no_variable_fails_that_call_unsent(store: Store, tmp_path: Path) -> None:
    answer = run(make_pool(tmp_path, [echo({"a": "${nope}"}), echo()]), store, tmp_path / "out")
    entry: dict[str, Any] = answer["steps"][0]
    assert (entry["status"], entry["result"]) == ("failed", False)
    assert "nope" in entry["message"]
    assert ops_of(store) == []


# Keys, reruns and calls in doubt


def test_a_rerun_of_the_task_skips_completed_keys_and_their_detail_still_feeds_references(
        store: Store, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [
        step("MELBIS_AGENT_CURRENCY", "CmdAdd", {"name": "Euro", "skey": "EUR"}, name="cur", key="eur"),
        echo({"id": "@cur.id"}, name="show"),
        step(TEST, "CmdFail", key="fails"),
    ])
    first = run(pool, store, tmp_path / "out", journal=journal, task_id="nightly")
    assert first["task"] == "nightly"
    assert statuses(first) == [(1, None, "completed"), (2, None, "completed"), (3, None, "failed")]
    again = run(pool, store, tmp_path / "out", journal=journal, task_id="nightly")
    assert statuses(again) == [(1, None, "skipped"), (2, None, "completed"), (3, None, "failed")]
    skipped, shown = again["steps"][0], again["steps"][1]
    assert skipped["step_id"] == first["steps"][0]["step_id"] == "nightly-1-1"
    assert skipped["time"] == first["steps"][0]["time"]
    assert skipped["detail"] == first["steps"][0]["detail"]
    assert shown["detail"] == {"id": first["steps"][0]["detail"]["id"]}
    assert shown["step_id"] == "nightly-2-2"
    assert (again["succeeded"], again["skipped"], again["failed"]) == (1, 1, 1)
    assert [op["command"] for op in ops_of(store)] == ["CmdAdd", "CmdEcho", "CmdFail", "CmdEcho",
                                                       "CmdFail"]
    assert ops_of(store, "CmdAdd")[0]["idempotency_key"] == "nightly:eur"
    # A refused key is sent anew on a rerun, not answered with the refusal the store kept.
    assert [op["idempotency_key"] for op in ops_of(store, "CmdFail")] == ["nightly:fails", "nightly:fails/2"]


def test_resume_continues_the_last_unfinished_task(store: Store, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [echo({"a": 1}, key="a"), step(TEST, "CmdFail", key="b")])
    first = run(pool, store, tmp_path / "out", journal=journal)
    resumed = run(pool, store, tmp_path / "out", journal=journal, resume=True)
    assert resumed["task"] == first["task"]
    assert statuses(resumed) == [(1, None, "skipped"), (2, None, "failed")]
    # A task runs the steps it was planned with: other steps are refused, not resumed.
    ok = make_pool(tmp_path, [echo({"a": 1}, key="a")])
    with pytest.raises(JournalError) as refused:
        run(ok, store, tmp_path / "out", journal=journal, resume=True)
    assert refused.value.message == (
        f"the steps of {ok.file} changed since task {first['task']} was planned - a task runs the steps "
        "it was planned with: start a new task for these.")
    done = run(ok, store, tmp_path / "out", journal=journal)
    assert (done["task"] != first["task"], done["status"]) == (True, "completed")
    # The task left unfinished is still the one a resume continues.
    assert run(pool, store, tmp_path / "out", journal=journal, resume=True)["task"] == first["task"]


def in_doubt_run(store_factory: Any, tmp_path: Path,
                 policy: str) -> tuple[dict[str, Any], dict[str, Any], Store, str]:
    """A call whose answer is lost (the store resets), then the task run again on a sound store."""
    journal = Journal(tmp_path / "j.sqlite")
    db, root = tmp_path / "doubt.db", tmp_path / "doubt-root"
    pool = make_pool(tmp_path, [echo({"a": 1}, name="one"), echo({"b": 2}, key="two"), echo({"c": 3})])
    faulty = store_factory("--fault", "reset:1", db=db, root=root)
    first = run(pool, faulty, tmp_path / "out", journal=journal, task_id="t")
    faulty.stop()
    sound = store_factory("--port", faulty.port, db=db, root=root)
    again = run(pool, sound, tmp_path / "out", journal=journal, task_id="t", in_doubt=policy)
    return first, again, sound, faulty.url


def test_a_lost_answer_is_in_doubt_and_is_retried_with_the_same_key(store_factory: Any,
                                                                    tmp_path: Path) -> None:
    first, again, sound, faulty_url = in_doubt_run(store_factory, tmp_path, "retry")
    assert statuses(first) == [(1, None, "in_doubt")]
    entry = first["steps"][0]
    assert entry["step_id"] == "t-1-1"
    assert entry["message"] == (f"the store at {faulty_url}/ closed the connection before answering; "
                                "the call may or may not have been carried out")
    assert (first["status"], first["failed"], first["not_run"]) == ("failed", 1, 2)
    assert statuses(again) == [(1, None, "completed"), (2, None, "completed"), (3, None, "completed")]
    assert again["in_doubt"] == []
    ops = ops_of(sound)
    # The reset store carried step 1 out; it was unkeyed, so the rerun repeated it.
    assert [op["params"] for op in ops] == [{"a": 1}, {"a": 1}, {"b": 2}, {"c": 3}]


def keyed_doubt(store_factory: Any, tmp_path: Path, policy: str) -> tuple[dict[str, Any], Store]:
    journal = Journal(tmp_path / "j.sqlite")
    db, root = tmp_path / "doubt.db", tmp_path / "doubt-root"
    pool = make_pool(tmp_path, [echo({"b": 2}, key="two", name="two"), echo({"c": "@two.b"})])
    faulty = store_factory("--fault", "reset:1", db=db, root=root)
    first = run(pool, faulty, tmp_path / "out", journal=journal, task_id="t")
    assert statuses(first) == [(1, None, "in_doubt")]
    faulty.stop()
    sound = store_factory("--port", faulty.port, db=db, root=root)
    return run(pool, sound, tmp_path / "out", journal=journal, task_id="t", in_doubt=policy), sound


def test_retry_sends_an_in_doubt_key_again_and_the_store_answers_the_repeat(store_factory: Any,
                                                                          tmp_path: Path) -> None:
    again, sound = keyed_doubt(store_factory, tmp_path, "retry")
    assert statuses(again) == [(1, None, "completed"), (2, None, "completed")]
    # The in-doubt list names the call left in doubt (run 1); its resend is the step's own entry.
    assert again["in_doubt"] == [{"num": 1, "name": "two", "key": "two", "step_id": "t-1-1",
                                  "action": "retried"}]
    assert again["steps"][0]["step_id"] == "t-1-2"
    assert again["steps"][1]["detail"] == {"c": 2}
    # The store honours keys: the repeat was answered from the first call, not carried out again.
    assert [op["params"] for op in ops_of(sound)] == [{"b": 2}, {"c": 2}]


def test_stop_stops_before_an_in_doubt_key(store_factory: Any, tmp_path: Path) -> None:
    again, sound = keyed_doubt(store_factory, tmp_path, "stop")
    assert statuses(again) == [(1, None, "in_doubt")]
    assert again["steps"][0]["message"] == (
        "Step 1 (two) was sent as t-1-1 and its answer never came back: it may or may not have been "
        "carried out. "
        "Check the store, then run the task again with --in-doubt skip (it was done) or --in-doubt retry "
        "(send it again with the same Idempotency-Key).")
    assert again["in_doubt"] == [{"num": 1, "name": "two", "key": "two", "step_id": "t-1-1",
                                  "action": "stopped"}]
    assert (again["status"], again["not_run"]) == ("failed", 1)
    assert [op["params"] for op in ops_of(sound)] == [{"b": 2}]


def test_skip_counts_an_in_doubt_key_done(store_factory: Any, tmp_path: Path) -> None:
    again, sound = keyed_doubt(store_factory, tmp_path, "skip")
    assert statuses(again) == [(1, None, "skipped"), (2, None, "failed")]
    assert again["steps"][0]["in_doubt"] is True
    assert again["in_doubt"] == [{"num": 1, "name": "two", "key": "two", "step_id": "t-1-1",
                                  "action": "skipped"}]
    # Its answer never came: the detail it would give is not known.
    assert again["steps"][1]["message"] == ("@two.b names a field the detail of that step does not have. "
                                            "The detail has no fields.")
    assert [op["params"] for op in ops_of(sound)] == [{"b": 2}]


def test_on_in_doubt_retries_a_keyed_call_in_the_same_run(store_factory: Any, tmp_path: Path) -> None:
    faulty = store_factory("--fault", "reset:0.5", "--seed", "7")
    pool = make_pool(tmp_path, [echo({"n": n}, key=f"k{n}", retry=Retry(attempts=10, backoff_ms=1,
                                                                     on_in_doubt=True))
                                for n in range(6)] + [echo({"unkeyed": 1}, retry=Retry(
                                    attempts=10, backoff_ms=1, on_in_doubt=True))])
    answer = run(pool, faulty, tmp_path / "out")
    keyed = [e for e in answer["steps"] if e["key"]]
    assert [e["status"] for e in keyed] == ["completed"] * 6
    assert any(item["action"] == "retried" for item in answer["in_doubt"])
    # Every keyed call was carried out once, however often it was sent.
    assert sorted(op["params"]["n"] for op in ops_of(faulty) if "n" in op["params"]) == list(range(6))
    # Without a key, a lost answer is never sent again.
    assert len([op for op in ops_of(faulty) if "unkeyed" in op["params"]]) == 1


# Steps over rows


def write_goods(path: Path, count: int) -> None:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["sku", "name", "price"])
        out.writerows([[f"S{n}", f"Goods {n}", f"{n}.50"] for n in range(count)])


def test_a_step_over_csv_rows_sends_a_call_per_row_with_keys(store: Store, tmp_path: Path) -> None:
    write_goods(tmp_path / "goods.csv", 5)
    journal = Journal(tmp_path / "j.sqlite")
    recorder = Recorder()
    pool = make_pool(tmp_path, [
        step("MELBIS_AGENT_STORE", "CmdAdd",
             {"sku": "${row.sku}", "name": "${row.name}", "price": "${row.price}"}, name="goods",
             key="goods-${row.sku}", for_each=ForEach(file="goods.csv")),
        echo({"last": "@goods.row.sku"}),
    ])
    answer = run(pool, store, tmp_path / "out", journal=journal, task_id="imp", reporter=recorder)
    assert (answer["total"], answer["succeeded"], len(answer["steps"])) == (6, 6, 2)
    summary = answer["steps"][0]
    assert {k: v for k, v in summary.items() if k not in ("detail", "time")} == {
        "num": 1, "name": "goods", "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd", "status": "completed",
        "key": None, "result": True, "message": "5 rows: 5 completed",
        "rows": {"total": 5, "completed": 5, "skipped": 0, "failed": 0, "in_doubt": 0, "not_run": 0},
        "calls": 5, "tables": {}, "failures": [], "failures_omitted": 0}
    # The last row's detail: the one references read.
    assert summary["detail"]["row"]["sku"] == "S4"
    assert isinstance(summary["time"]["trip"], int)
    assert answer["steps"][1]["detail"] == {"last": "S4"}
    assert recorder.of("rows_progress") == [("rows_progress", 1, n, 5) for n in range(6)]
    # Every call is in the journal, one record a row.
    assert [(c["row"], c["key"], c["status"]) for c in journal.calls("imp") if c["num"] == 1] == [
        (n, f"goods-S{n}", "completed") for n in range(5)]
    again = run(pool, store, tmp_path / "out", journal=journal, task_id="imp")
    assert [e["status"] for e in again["steps"]] == ["completed", "completed"]
    assert again["steps"][0]["message"] == "5 rows: 5 skipped"
    assert again["steps"][0]["rows"]["skipped"] == 5
    assert (again["skipped"], again["succeeded"]) == (5, 1)
    # A skipped last row still gives its detail, read back from the journal.
    assert again["steps"][0]["detail"] == summary["detail"]
    assert again["steps"][1]["detail"] == {"last": "S4"}
    assert len(ops_of(store, "CmdAdd")) == 5


def test_a_failed_row_is_listed_in_full_and_stops_the_pool(store: Store, tmp_path: Path) -> None:
    (tmp_path / "rows.jsonl").write_text('{"ms": 1}\n{"ms": -5}\n{"ms": 2}\n')
    pool = make_pool(tmp_path, [step(TEST, "CmdSleep", {"ms": "${row.ms}"},
                                     for_each=ForEach(file="rows.jsonl"))])
    answer = run(pool, store, tmp_path / "out")
    (summary,) = answer["steps"]
    assert (summary["status"], summary["result"]) == ("failed", False)
    assert summary["message"] == "3 rows: 1 completed, 1 failed (first at row 1), 1 not run"
    assert summary["rows"] == {"total": 3, "completed": 1, "skipped": 0, "failed": 1, "in_doubt": 0,
                               "not_run": 1}
    assert summary["calls"] == 2
    (failure,) = summary["failures"]
    assert (failure["row"], failure["status"], failure["message"]) == (1, "failed", "ms is from 0 to 600000.")
    assert isinstance(failure["time"]["trip"], int)
    assert (answer["total"], answer["succeeded"], answer["failed"], answer["not_run"]) == (3, 1, 1, 1)


def test_chunks_send_many_rows_in_one_call(store: Store, tmp_path: Path) -> None:
    write_goods(tmp_path / "goods.csv", 7)
    out = tmp_path / "out"
    pool = make_pool(tmp_path, [step(IMPORT, "CmdAdd", name="imp", key="chunk-${row.sku}",
                                     for_each=ForEach(file="goods.csv", chunk=3, field="goods"))])
    answer = run(pool, store, out)
    (summary,) = answer["steps"]
    assert (summary["calls"], summary["rows"]["total"], summary["rows"]["completed"]) == (3, 7, 7)
    assert summary["message"] == "7 rows in 3 calls: 7 completed"
    assert (answer["total"], answer["succeeded"]) == (3, 3)
    assert [len(op["params"]["goods"]) for op in ops_of(store)] == [3, 3, 1]
    path = out / "tables" / f"step1.{IMPORT}.CmdAdd.goods.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 7
    # The step's tables add up its calls': every row written, the first three as the head.
    assert summary["tables"]["goods"]["rows"] == 7
    assert summary["tables"]["goods"]["file"] == str(path)
    assert summary["tables"]["goods"]["head"] == lines[:3]


def test_sample_runs_only_the_first_rows(store: Store, tmp_path: Path) -> None:
    write_goods(tmp_path / "goods.csv", 10)
    pool = make_pool(tmp_path, [step("MELBIS_AGENT_STORE", "CmdGet", {"sku": "${row.sku}"},
                                     for_each=ForEach(file="goods.csv"))])
    answer = run(pool, store, tmp_path / "out", sample=3)
    assert (answer["total"], len(answer["steps"])) == (3, 1)
    assert answer["steps"][0]["message"] == "3 rows: 3 completed"
    assert [op["params"]["sku"] for op in ops_of(store)] == ["S0", "S1", "S2"]


def test_a_step_over_the_rows_of_an_earlier_steps_table(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [
        step(TEST, "CmdTable", {"rows": 4, "width": 2}, name="tab"),
        echo({"n": "${row.n}"}, for_each=ForEach(step="tab", table="rows")),
        echo({"n": "${row.n}"}, for_each=ForEach(step="tab")),
    ])
    answer = run(pool, store, tmp_path / "out")
    assert answer["total"] == 9
    assert answer["result"] is True
    assert [op["params"]["n"] for op in ops_of(store, "CmdEcho")] == [1, 2, 3, 4, 1, 2, 3, 4]


def test_a_missing_data_file_is_refused_before_anything_is_sent(store: Store, tmp_path: Path) -> None:
    pool = make_pool(tmp_path, [echo(), echo({"n": "${row.n}"}, for_each=ForEach(file="nope.csv"))])
    with pytest.raises(InputError) as caught:
        run(pool, store, tmp_path / "out")
    assert caught.value.message == (f"No such file: {tmp_path / 'nope.csv'} - for_each.file of step 2 is "
                                    "read relative to the pool file's folder.")
    assert ops_of(store) == []


def test_a_pool_refused_while_planning_leaves_no_task_behind(store: Store, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    (tmp_path / "rows.csv").write_text("n\n1\n")
    pool = make_pool(tmp_path, [echo({"n": "${row.n}"}, for_each=ForEach(file="rows.csv"))])
    assert run(pool, store, tmp_path / "out", journal=journal, task_id="t")["result"] is True
    (tmp_path / "rows.csv").unlink()
    with pytest.raises(InputError):
        run(pool, store, tmp_path / "out", journal=journal)
    with pytest.raises(InputError):
        run(pool, store, tmp_path / "out", journal=journal, task_id="t")
    # Neither refusal opened a task: the one done stays as it was, and nothing looks unfinished.
    assert [(t.id, t.status, t.runs) for t in journal.tasks()] == [("t", "completed", 1)]
    assert journal.last_unfinished(pool.file) is None
    assert len(ops_of(store)) == 1


def test_a_data_file_broken_at_a_row_refuses_the_run_before_anything_is_sent(store: Store,
                                                                           tmp_path: Path) -> None:
    """The runner that plans a task reads its data files whole, in the transaction that creates
    it: a row that cannot be read refuses the run, and leaves no task, before any call is sent."""
    data = tmp_path / "rows.jsonl"
    data.write_text('{"n": 1}\n{"n": 2}\n{"n": 3\n{"n": 4}\n')
    journal = Journal(tmp_path / "j.sqlite")
    pool = make_pool(tmp_path, [echo({"n": "${row.n}"}, for_each=ForEach(file="rows.jsonl")), echo()])
    with pytest.raises(InputError) as refused:
        run(pool, store, tmp_path / "out", journal=journal)
    assert refused.value.message == (f"{data} line 3 is not whole json - Expecting ',' delimiter at "
                                     "column 8; write one JSON object per line.")
    assert ops_of(store) == []
    assert journal.tasks() == []


def test_a_step_plan_is_frozen_so_no_run_can_change_what_another_run_reads() -> None:
    """The shared runner keeps one plan per step for all its calls; what a run changes (the table
    files it started) lives in the run's own state, never in the plan."""
    plan = step_plan(Step(num=1, unit=TEST, command="CmdEcho", params={"a": 1}), set(), keep_tables=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.keep_tables = True  # type: ignore[misc]
    assert isinstance(plan.deps, frozenset)
    assert not hasattr(plan, "written")
    assert not hasattr(plan, "tables")
