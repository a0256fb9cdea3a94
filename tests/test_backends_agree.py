"""A task behaves the same whichever journal keeps it: a SQLite file on one host, or PostgreSQL
shared by runners on many.  Each test runs on both (``journal`` is ``sqlite`` or ``postgresql``).

The first run of each task fails some calls (the store refuses them, or the runner is killed);
the same task run again sends exactly what did not land, and ``pooler runs`` and ``pooler show``
count it alike on both journals.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler
from sharedkit import journal_of, run_here, start_runner, wait_for, write_pool

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]


def goods_pool(folder: Path, currencies: list[int], *, stop: bool = False) -> Path:
    """Goods added one a row, each in the currency its row names (a keyed step), then an unkeyed
    step that refers to it: the store refuses a row whose currency it does not hold."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "goods.jsonl").write_text("".join(
        json.dumps({"sku": f"S-{i}", "curr": c}) + "\n" for i, c in enumerate(currencies)))
    return write_pool(folder, [
        f"stop_on_error: {str(stop).lower()}", "pool:",
        "  - {name: goods, unit: MELBIS_AGENT_STORE, command: CmdAdd, key: 'g-${row.sku}',",
        "     params: {sku: '${row.sku}', name: 'Goods ${row.sku}', price: 10, curr_id: '${row.curr}'},",
        "     for_each: {file: goods.jsonl}}",
        "  - {name: after, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {last: '@goods.id'}}",
    ])


def add_currency(store: Store, name: str) -> None:
    added = store.call("MELBIS_AGENT_CURRENCY", "CmdAdd", {"name": name, "multiplex": 1, "division": 1})
    assert added.json()["data"]["result"] is True, added.text


def sent(store: Store, since: int = 0) -> list[tuple[str, str | None]]:
    """The commands the store carried out after the first ``since``, with their Idempotency-Keys."""
    return [(op["command"], op["idempotency_key"]) for op in store.ops()[since:]]


def counted(journal: str, task: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task as ``pooler runs --json`` lists it and as ``pooler show --json`` shows it."""
    listed = pooler("runs", "--journal", journal, "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [t for t in json.loads(listed.stdout)["tasks"] if t["id"] == task]
    shown = pooler("show", task, "--journal", journal, "--json")
    assert shown.returncode == 0, shown.stderr
    return row, json.loads(shown.stdout)


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_task_run_again_sends_exactly_its_failed_calls_under_the_next_key_round(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    add_currency(store, "Euro")
    pool = goods_pool(tmp_path / "pool", [1, 1, 2, 1, 2])
    before = len(store.ops())
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 1, err
    assert sent(store, before) == [("CmdAdd", f"t:g-S-{i}") for i in range(5)]
    assert (answer["succeeded"], answer["failed"], answer["not_run"]) == (3, 2, 1)
    row, shown = counted(where, "t")
    assert (row["status"], row["runs"]) == ("partial", 1)
    assert row["plan"] == shown["plan"] == {"planned": 6, "completed": 3, "failed": 2, "in_doubt": 0,
                                            "skipped": 0, "not_run": 1}

    add_currency(store, "Dollar")
    before = len(store.ops())
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    # The refused rows under the key's second round, the step that referred to them now; nothing
    # completed went out twice.
    assert sent(store, before) == [("CmdAdd", "t:g-S-2/2"), ("CmdAdd", "t:g-S-4/2"), ("CmdEcho", None)]
    assert answer["status"] == "completed"
    # This run's answer, alike on both: the rows an earlier run did are skipped, not completed.
    assert (answer["succeeded"], answer["failed"], answer["skipped"], answer["not_run"]) == (3, 0, 3, 0)
    assert answer["steps"][0]["rows"] == {"total": 5, "completed": 2, "skipped": 3, "failed": 0,
                                          "in_doubt": 0, "not_run": 0}
    row, shown = counted(where, "t")
    assert (row["status"], row["runs"]) == ("completed", 2)
    assert row["plan"] == shown["plan"] == {"planned": 6, "completed": 6, "failed": 0, "in_doubt": 0,
                                            "skipped": 0, "not_run": 0}
    # Run once more, no keyed call is sent again; the unkeyed one that completed is, on either
    # journal: without a key nothing tells it apart from a new call ("without keys the batch
    # restarts from the beginning").
    before = len(store.ops())
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    assert sent(store, before) == [("CmdEcho", None)]
    assert (answer["succeeded"], answer["skipped"]) == (1, 5)
    assert answer["steps"][1]["status"] == "completed"


def echo_pool(folder: Path, n: int) -> Path:
    """One keyed step over ``n`` rows, one call at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.jsonl").write_text("".join(json.dumps({"n": i}) + "\n" for i in range(n)))
    return write_pool(folder, ["stop_on_error: false", "pool:",
                               "  - {name: echo, unit: MELBIS_AGENT_TEST, command: CmdEcho,",
                               "     params: {n: '${row.n}'}, key: 'k-${row.n}',",
                               "     for_each: {file: rows.jsonl}}"])


@pytest.mark.parametrize("journal", JOURNALS)
@pytest.mark.parametrize(("policy", "status", "action"), [("retry", "completed", "retried"),
                                                          ("skip", "skipped", "skipped")])
def test_calls_in_doubt_of_a_task_run_again_follow_its_in_doubt_policy(
        journal: str, policy: str, status: str, action: str, store_factory: Any,
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    db, root = tmp_path / "shared.db", tmp_path / "shared-root"
    faulty: Store = store_factory("--fault", "reset:1", db=db, root=root)
    pool = echo_pool(tmp_path / "pool", 3)
    code, answer, err = run_here(pool, faulty, where, "t", tmp_path / "out")
    assert code == 1, err
    assert answer["calls_in_doubt"] == 3
    faulty.stop()
    sound: Store = store_factory("--port", faulty.port, db=db, root=root)
    code, answer, err = run_here(pool, sound, where, "t", tmp_path / "out", "--in-doubt", policy)
    assert code == 0, err
    # Sent again under the same key and round, a store that honours keys answers from its first
    # try: each command ran once; skipped, nothing was sent again.
    assert sent(sound) == [("CmdEcho", f"t:k-{i}") for i in range(3)]
    rows = answer["steps"][0]["rows"]
    assert (rows[status], rows["in_doubt"], rows["failed"]) == (3, 0, 0)
    assert [(i["row"], i["action"]) for i in answer["in_doubt"]] == [(i, action) for i in range(3)]
    row, shown = counted(where, "t")
    assert row["plan"] == shown["plan"] == {"planned": 3, "completed": 3 if policy == "retry" else 0,
                                            "failed": 0, "in_doubt": 0,
                                            "skipped": 0 if policy == "retry" else 3, "not_run": 0}


@pytest.mark.process
@pytest.mark.parametrize("journal", JOURNALS)
def test_a_task_killed_and_run_again_completes_every_row_exactly_once_by_key(
        journal: str, store_factory: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    store: Store = store_factory("--latency-ms", "20")
    pool = echo_pool(tmp_path / "pool", 40)
    # A short lease, so the killed runner's calls are taken back soon on PostgreSQL.
    extra = ("--timeout", "1", "--lease", "2") if journal == "postgresql" else ()
    killed = start_runner(pool, store, where, "t", tmp_path / "out", *extra)
    wait_for(lambda: len(store.ops()) >= 5)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    killed.communicate()
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out", *extra)
    assert code == 0, err
    assert answer["steps"][0]["rows"]["total"] == 40
    keys = [key for _, key in sent(store)]
    assert sorted(keys) == sorted(f"t:k-{i}" for i in range(40))
    row, shown = counted(where, "t")
    assert row["status"] == "completed"
    assert row["plan"] == shown["plan"] == {"planned": 40, "completed": 40, "failed": 0, "in_doubt": 0,
                                            "skipped": 0, "not_run": 0}


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_task_stopped_by_an_error_runs_on_when_run_again(journal: str, store: Store,
                                                            request: pytest.FixtureRequest,
                                                            tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    add_currency(store, "Euro")
    pool = goods_pool(tmp_path / "pool", [1, 2, 1], stop=True)
    before = len(store.ops())
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 1, err
    assert sent(store, before) == [("CmdAdd", "t:g-S-0"), ("CmdAdd", "t:g-S-1")]
    assert (answer["succeeded"], answer["failed"], answer["not_run"]) == (1, 1, 2)
    add_currency(store, "Dollar")
    before = len(store.ops())
    code, answer, err = run_here(pool, store, where, "t", tmp_path / "out")
    assert code == 0, err
    # The halt is the first run's: the failed row goes again under its next round, the rows and
    # the step it held back are sent for the first time.
    assert sent(store, before) == [("CmdAdd", "t:g-S-1/2"), ("CmdAdd", "t:g-S-2"), ("CmdEcho", None)]
    row, shown = counted(where, "t")
    assert row["plan"] == shown["plan"] == {"planned": 4, "completed": 4, "failed": 0, "in_doubt": 0,
                                            "skipped": 0, "not_run": 0}


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_call_carried_out_whose_tables_could_not_be_written_is_sent_again_under_the_same_round(
        journal: str, store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    pool = write_pool(tmp_path / "pool", [
        "pool:", "  - {name: listing, unit: MELBIS_AGENT_TEST, command: CmdTable, key: tab,",
        "     params: {rows: 2, width: 3}}"])
    out = tmp_path / "out"
    # A folder where the table's file goes: the answer's rows cannot be written.
    blocked = out / "tables" / "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl"
    blocked.mkdir(parents=True)
    code, answer, err = run_here(pool, store, where, "t", out)
    assert code == 1, err
    step = answer["steps"][0]
    assert (step["status"], step["result"]) == ("failed", True)
    assert "The store carried the call out, but its tables could not be written" in step["message"]
    blocked.rmdir()
    code, answer, err = run_here(pool, store, where, "t", out)
    assert code == 0, err
    # The same key and round: the store answered from its record, and ran the command once.
    assert sent(store) == [("CmdTable", "t:tab")]
    assert answer["steps"][0]["status"] == "completed"


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_task_run_again_with_in_doubt_stop_sends_nothing_and_names_the_call_in_doubt(
        journal: str, store_factory: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    db, root = tmp_path / "shared.db", tmp_path / "shared-root"
    faulty: Store = store_factory("--fault", "reset:1", db=db, root=root)
    pool = echo_pool(tmp_path / "pool", 1)
    assert run_here(pool, faulty, where, "t", tmp_path / "out")[0] == 1
    faulty.stop()
    sound: Store = store_factory("--port", faulty.port, db=db, root=root)
    code, answer, err = run_here(pool, sound, where, "t", tmp_path / "out", "--in-doubt", "stop")
    assert code == 1, err
    assert sent(sound) == [("CmdEcho", "t:k-0")]
    assert [(i["row"], i["action"]) for i in answer["in_doubt"]] == [(0, "stopped")]
    (failure,) = answer["steps"][0]["failures"]
    assert failure["message"] == (
        f"Step 1 (echo) was sent as {failure['step_id']} and its answer never came back: it may or may "
        "not have been carried out. Check the store, then run the task again with --in-doubt skip (it "
        "was done) or --in-doubt retry (send it again with the same Idempotency-Key).")


@pytest.mark.parametrize("journal", JOURNALS)
def test_calls_and_chunks_a_store_closed_on_are_sent_again_under_the_same_key_round(
        journal: str, store_factory: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    db, root = tmp_path / "shared.db", tmp_path / "shared-root"
    refusing: Store = store_factory("--fault", "refuse:1", db=db, root=root)
    folder = tmp_path / "pool"
    folder.mkdir()
    (folder / "rows.jsonl").write_text("".join(json.dumps({"n": i}) + "\n" for i in range(4)))
    pool = write_pool(folder, [
        "stop_on_error: false", "pool:",
        "  - {name: each, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {each: '${row.n}'},",
        "     key: 'e-${row.n}', for_each: {file: rows.jsonl}, retry: {attempts: 1}}",
        "  - {name: chunks, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {tag: chunk},",
        "     key: 'c-${row.n}', for_each: {file: rows.jsonl, chunk: 3, field: part}, retry: {attempts: 1}}",
    ])
    code, answer, err = run_here(pool, refusing, where, "t", tmp_path / "out")
    assert code == 1, err
    # The connection closed once the request left: in doubt, though the command never ran.
    assert [(i["key"], i["action"]) for i in answer["in_doubt"]] == [
        *((f"e-{i}", "left") for i in range(4)), ("c-0#0-2", "left"), ("c-3#3-3", "left")]
    assert sent(refusing) == []
    refusing.stop()
    sound: Store = store_factory("--port", refusing.port, db=db, root=root)
    code, answer, err = run_here(pool, sound, where, "t", tmp_path / "out")
    assert code == 0, err
    assert sent(sound) == [("CmdEcho", f"t:e-{i}") for i in range(4)] + [
        ("CmdEcho", "t:c-0#0-2"), ("CmdEcho", "t:c-3#3-3")]
    row, shown = counted(where, "t")
    assert row["plan"] == shown["plan"] == {"planned": 6, "completed": 6, "failed": 0, "in_doubt": 0,
                                            "skipped": 0, "not_run": 0}
