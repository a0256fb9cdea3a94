"""A task on a PostgreSQL journal (runners that share it) behaves as the same task on SQLite: the
same pool against the same store gives the same answer, whichever journal keeps it.

Each test runs on both journals (``journal`` is ``sqlite`` or ``postgresql``); the runner on
PostgreSQL is a real ``pooler run`` process, as on a host that joins the task.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, environment, pooler
from sharedkit import journal_of, token_file, write_pool

from pooler.journal.postgres.schema import upgrade
from pooler.store.faults import FaultPlan, parse_rule

#: The runner on PostgreSQL is a process of its own: that case is marked so.
JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=[pytest.mark.postgres, pytest.mark.process])]
#: The store's faults: a call reset after its command ran is in doubt (seed 11 resets 6 of 30).
FAULT = "reset:0.15"
SEED = 11


def run(pool: Path, store: Store, journal: str, task: str, out: Path, *extra: str
        ) -> tuple[int, dict[str, Any], str]:
    """``pooler run`` of the task: in the test's process on SQLite, a runner process on PostgreSQL."""
    token = token_file(out.parent / f"{out.name}-secret", store)
    argv = ["run", str(pool), "--store", store.url, "--token-file", str(token), "--journal", journal,
            "--task", task, "--json", "--out", str(out), *extra]
    if journal.startswith("postgresql"):
        proc = subprocess.run([sys.executable, "-m", "pooler", *argv], capture_output=True, text=True,
                              env=environment(), cwd=ROOT, timeout=120, check=False)
    else:
        proc = pooler(*argv)
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def rows_pool(folder: Path, n: int) -> Path:
    """One keyed step over ``n`` rows, sequential: the store's seeded faults strike the same calls."""
    data = folder / "rows.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(n)))
    return write_pool(folder, ["stop_on_error: false", "pool:",
                               "  - {name: echo, unit: MELBIS_AGENT_TEST, command: CmdEcho,",
                               "     params: {n: '${row.n}'}, key: 'k-${row.n}',",
                               "     for_each: {file: rows.jsonl}}"])


def reset_rows(n: int) -> list[int]:
    """The rows whose call the store resets: its fault plan drawn as it draws, one call at a time."""
    plan = FaultPlan([parse_rule(FAULT)], seed=SEED)
    request = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}
    return [i for i in range(n) if plan.pick(request) == "reset"]


@pytest.mark.parametrize("journal", JOURNALS)
def test_every_call_that_went_in_doubt_in_the_run_is_listed_as_left(journal: str, store_factory: Any,
                                                                    request: pytest.FixtureRequest,
                                                                    tmp_path: Path) -> None:
    store = store_factory("--fault", FAULT, "--seed", str(SEED))
    expected = reset_rows(30)
    assert len(expected) >= 3
    code, answer, err = run(rows_pool(tmp_path / "pool", 30), store, journal_of(journal, request, tmp_path),
                            "t", tmp_path / "out")
    assert code == 1, err
    assert answer["calls_in_doubt"] == len(expected)
    listed = answer["in_doubt"]
    assert [(i["num"], i["name"], i["row"], i["key"], i["action"]) for i in listed] == [
        (1, "echo", row, f"k-{row}", "left") for row in expected]
    # Each names the call that went out, as the step's failures do.
    failures = {f["row"]: f["step_id"] for f in answer["steps"][0]["failures"] if f["status"] == "in_doubt"}
    assert {i["row"]: i["step_id"] for i in listed} == failures
    assert all(failures.values())


def three_steps(folder: Path, n: int) -> Path:
    """A step per row, a chunked step (3 rows a call) over the same file, and a step over the
    table of an earlier step: every kind of step over rows a sample cuts short."""
    data = folder / "rows.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(n)))
    return write_pool(folder, [
        "pool:",
        "  - {name: each, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {each: '${row.n}'},",
        "     key: 'e-${row.n}', for_each: {file: rows.jsonl}}",
        "  - {name: chunks, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {tag: chunk},",
        "     key: 'c-${row.n}', for_each: {file: rows.jsonl, chunk: 3, field: part}}",
        f"  - {{name: source, unit: MELBIS_AGENT_TEST, command: CmdTable, params: {{rows: {n}, width: 2}}}}",
        "  - {name: over, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {over: '${row.n}'},",
        "     key: 'o-${row.n}', for_each: {step: source, table: rows}}",
    ])


def rows_sent(store: Store) -> dict[str, list[int]]:
    """Which rows each step over rows carried to the store, in the order they arrived."""
    sent: dict[str, list[int]] = {"each": [], "chunks": [], "over": []}
    for op in store.ops():
        params = op["params"]
        if op["command"] != "CmdEcho":
            continue
        if "each" in params:
            sent["each"].append(int(params["each"]))
        elif "over" in params:
            sent["over"].append(int(params["over"]))
        else:
            sent["chunks"].extend(int(row["n"]) for row in params["part"])
    return sent


def task_status(journal: str, task: str) -> str:
    listed = pooler("runs", "--journal", journal, "--json")
    assert listed.returncode == 0, listed.stderr
    (status,) = [t["status"] for t in json.loads(listed.stdout)["tasks"] if t["id"] == task]
    return str(status)


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_sampled_task_is_sampled_and_its_full_run_sends_every_other_row_once(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    pool = three_steps(tmp_path / "pool", 20)
    code, answer, err = run(pool, store, where, "t", tmp_path / "out", "--sample", "5")
    assert code == 0, err
    assert answer["status"] == "completed"
    assert task_status(where, "t") == "sampled"
    assert rows_sent(store) == {"each": [0, 1, 2, 3, 4], "chunks": [0, 1, 2, 3, 4],
                                "over": [1, 2, 3, 4, 5]}
    code, answer, err = run(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    assert answer["status"] == "completed"
    assert task_status(where, "t") == "completed"
    sent = rows_sent(store)
    # Every row reached the store once: the sampled ones in the first run, the rest in this one.
    assert sorted(sent["each"]) == list(range(20))
    assert sorted(sent["chunks"]) == list(range(20))
    assert sorted(sent["over"]) == list(range(1, 21))
    # The sampled chunks stay as they were cut; the chunks after them start at the first row left.
    assert [op["idempotency_key"] for op in store.ops() if "part" in op["params"]] == [
        "t:c-0#0-2", "t:c-3#3-4", "t:c-5#5-7", "t:c-8#8-10", "t:c-11#11-13", "t:c-14#14-16", "t:c-17#17-19"]
    for step in (answer["steps"][0], answer["steps"][1], answer["steps"][3]):
        rows = step["rows"]
        assert (rows["total"], rows["completed"] + rows["skipped"]) == (20, 20), step
        assert (rows["failed"], rows["in_doubt"], rows["not_run"]) == (0, 0, 0), step


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_wider_sample_sends_only_the_rows_it_adds_and_cuts_the_chunk_it_ends_in(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    pool = three_steps(tmp_path / "pool", 20)
    for sample in ("5", "7"):
        code, _, err = run(pool, store, where, "t", tmp_path / "out", "--sample", sample)
        assert code == 0, err
        assert task_status(where, "t") == "sampled"
    sent = rows_sent(store)
    assert sorted(sent["each"]) == sorted(sent["chunks"]) == list(range(7))
    code, _, err = run(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    sent = rows_sent(store)
    assert sorted(sent["each"]) == sorted(sent["chunks"]) == list(range(20))
    # No chunk reaches over a sample's end: the second sample's chunk ends at row 6.  The task keeps
    # the chunks it planned after the first sample, the one the second sample ended in split at its
    # end, on either journal.
    keys = [op["idempotency_key"] for op in store.ops() if "part" in op["params"]]
    assert keys == ["t:c-0#0-2", "t:c-3#3-4", "t:c-5#5-6",
                    "t:c-7#7-7", "t:c-8#8-10", "t:c-11#11-13", "t:c-14#14-16", "t:c-17#17-19"]


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_run_writes_its_junit_file_on_either_journal(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from junit_schema import jenkins_junit  # noqa: PLC0415

    junit = tmp_path / "run.xml"
    code, answer, err = run(rows_pool(tmp_path / "pool", 4), store, journal_of(journal, request, tmp_path),
                            "t", tmp_path / "out", "--junit", str(junit))
    assert (code, answer["succeeded"]) == (0, 4), err
    assert f"pooler: JUnit XML of the run written to {junit}" in err
    suite = jenkins_junit(junit).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("1", "0", "0")


@pytest.mark.parametrize("journal", JOURNALS)
def test_the_report_of_a_task_run_twice_draws_each_run_alike_on_either_journal(
        journal: str, store_factory: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from browser import Elements  # noqa: PLC0415

    where = journal_of(journal, request, tmp_path)
    db, root = tmp_path / "shared.db", tmp_path / "shared-root"
    faulty: Store = store_factory("--fault", "reset:1", db=db, root=root)
    pool = rows_pool(tmp_path / "pool", 3)
    report = tmp_path / "report.html"
    code, _, err = run(pool, faulty, where, "t", tmp_path / "out", "--report", str(report))
    assert code == 1, err
    assert f"pooler: the report of task t written to {report}" in err
    first = Elements(report.read_text(encoding="utf-8"))
    text = " ".join(first.all_text().split())
    assert "3 calls in doubt" in text
    assert len([b for b in first.having("rect", "bar") if b["class"] == "tip bar in_doubt"]) == 3
    # The command it tells runs the task again where it went (a URL without its password).
    assert f"--task t --store {faulty.url} --out {tmp_path / 'out'} --journal {where} --in-doubt skip" in text
    faulty.stop()
    sound: Store = store_factory("--port", faulty.port, db=db, root=root)
    code, _, err = run(pool, sound, where, "t", tmp_path / "out", "--report", str(report))
    assert code == 0, err
    page = Elements(report.read_text(encoding="utf-8"))
    assert [s["id"] for s in page.having("section", "run")] == ["run-2", "run-1"]
    assert "Run 2 (the latest)" in page.all_text()
    assert page.having("section", id="in-doubt") == []
    # Every attempt on its run's timeline: three lost answers, then the same calls answered.
    kinds = [b["class"] for b in page.having("rect", "bar")]
    assert sorted(kinds) == ["tip bar completed"] * 3 + ["tip bar in_doubt"] * 3
    # pooler show --html draws the same page from the journal alone.
    shown = tmp_path / "shown.html"
    proc = pooler("show", "t", "--journal", where, "--html", str(shown))
    assert proc.returncode == 0, proc.stderr
    again = Elements(shown.read_text(encoding="utf-8"))
    assert [b["class"] for b in again.having("rect", "bar")] == kinds


@pytest.mark.parametrize("journal", JOURNALS)
def test_resume_continues_the_last_unfinished_task_of_the_pool_on_either_journal(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    pool = rows_pool(tmp_path / "pool", 6)
    token = token_file(tmp_path / "secret", store)
    argv = ["run", str(pool), "--store", store.url, "--token-file", str(token), "--journal", where, "--json",
            "--out", str(tmp_path / "out")]
    sampled = pooler(*argv, "--task", "night", "--sample", "2")
    assert sampled.returncode == 0, sampled.stderr
    resumed = pooler(*argv, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    answer = json.loads(resumed.stdout)
    assert answer["task"] == "night"
    assert sorted(op["params"]["n"] for op in store.ops()) == list(range(6))
    listed = json.loads(pooler("runs", "--journal", where, "--json").stdout)["tasks"]
    assert [(t["id"], t["status"], t["plan"]["completed"]) for t in listed] == [("night", "completed", 6)]


@pytest.mark.postgres
@pytest.mark.process
def test_replan_of_a_shared_task_its_runners_still_hold_is_refused_and_changes_nothing(
        store_factory: Any, pg_url: str, tmp_path: Path) -> None:
    from sharedkit import finish, query, start_runner, wait_for  # noqa: PLC0415

    upgrade(pg_url)
    slow: Store = store_factory("--latency-ms", "100")
    pool = rows_pool(tmp_path / "pool", 40)
    busy = start_runner(pool, slow, pg_url, "t", tmp_path / "out-a")
    done = "SELECT count(*) FROM work WHERE task = 't' AND state = 'done'"
    wait_for(lambda: query(pg_url, done)[0][0] >= 1)
    (tmp_path / "pool" / "rows.jsonl").write_text("".join(json.dumps({"n": i}) + "\n" for i in range(41)))
    before = query(pg_url, "SELECT num, idx, key_text FROM work WHERE task = 't' ORDER BY num, idx")
    code, _, err = run(pool, slow, pg_url, "t", tmp_path / "out-b", "--replan")
    assert code == 2
    assert err == ("pooler: --replan refused for task t: runners still hold it - run it with --replan once "
                   "they have ended.\npooler: refused before the first step; nothing was sent.\n")
    assert query(pg_url, "SELECT num, idx, key_text FROM work WHERE task = 't' ORDER BY num, idx") == before
    code, answer, err = finish(busy)
    assert code == 0, err
    assert answer is not None
    assert answer["steps"][0]["rows"]["completed"] == 40


@pytest.mark.parametrize("journal", JOURNALS)
def test_the_full_run_of_a_sampled_task_checks_the_rows_the_sample_left_unchecked(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    pool = rows_pool(tmp_path / "pool", 2)
    rows = [json.dumps({"n": i}) for i in range(5)]
    rows.insert(3, json.dumps({"m": 3}))
    (tmp_path / "pool" / "rows.jsonl").write_text("".join(r + "\n" for r in rows))
    code, answer, err = run(pool, store, where, "t", tmp_path / "out", "--sample", "2")
    assert (code, answer["succeeded"]) == (0, 2), err
    sent = len(store.ops())
    code, answer, err = run(pool, store, where, "t", tmp_path / "out")
    # The row the sample did not read is told before anything more is sent, on either journal.
    assert code == 2
    told = f"row 4 of {tmp_path / 'pool' / 'rows.jsonl'}: ${{row.n}}: row has no field [n] - its fields: m."
    # Once for the row's params, once for its key.
    assert [p["message"] for p in answer["problems"]] == [told, told]
    assert len(store.ops()) == sent


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_step_referring_to_a_sampled_step_runs_once_its_sample_is_done(
        journal: str, store: Store, tmp_path: Path, request: Any) -> None:
    """The calls planned beyond a sample wait for a run that asks for them: a step that refers to a
    sampled step waits for the calls of the sample, not for them (it waited for ever)."""
    where = journal_of(journal, request, tmp_path)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(6)))
    pool = write_pool(tmp_path, [
        "pool:",
        "  - {name: each, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {each: '${row.n}'},",
        "     key: 'e-${row.n}', for_each: {file: rows.jsonl}}",
        "  - {name: last, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {seen: '@each.each'}}"])
    code, answer, err = run(pool, store, where, "t", tmp_path / "out", "--sample", "2")
    assert code == 0, err
    steps = [(s["name"], s["status"]) for s in answer["steps"]]
    assert steps == [("each", "completed"), ("last", "completed")]
    assert [op["params"] for op in store.ops()] == [{"each": 0}, {"each": 1}, {"seen": 1}]
