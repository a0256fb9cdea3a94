"""A step's probe settles its calls in doubt: a call the probe finds landed is completed (and its
detail, by ``detail:``, feeds later references) without being sent again; one proven not carried
out is sent again once, under its next key round; one whose probe settles nothing stays in doubt.
In the run, in a later run and in a redrive, on either journal, against the reference store over
HTTP, counting what the store carried out."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler, start_store
from sharedkit import journal_of, token_file

from pooler.run.redrive import RedrivePlan
from pooler.store.faults import FaultPlan, Rule

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
ROWS = 4
LAST = f"G{ROWS - 1}"


class Once(FaultPlan):
    """The store's faults, each once: the first request of that command for that sku suffers it."""

    def __init__(self, **faults: str) -> None:
        super().__init__([])
        self.left = {tuple(name.split("_")): kind for name, kind in faults.items()}

    def pick(self, request: dict[str, Any]) -> str | None:
        sku = (request.get("params") or {}).get("sku")
        return self.left.pop((str(request.get("command")), str(sku)), None)


def write_pool(tmp_path: Path, rows: int = ROWS, *, probe: str = "{command: CmdGet, params: {sku: "
               "'${row.sku}'}, landed: found, detail: row}") -> Path:
    folder = tmp_path / "pools"
    folder.mkdir(exist_ok=True)
    lines = "".join(f"G{i},Goods {i},{i}.5\n" for i in range(rows))
    (folder / "goods.csv").write_text("sku,name,price\n" + lines)
    pool = folder / "pool.yaml"
    pool.write_text(
        "stop_on_error: false\n"
        "pool:\n"
        "  - name: add\n"
        "    unit: MELBIS_AGENT_STORE\n"
        "    command: CmdAdd\n"
        "    for_each: {file: goods.csv}\n"
        "    key: goods-${row.sku}\n"
        "    params: {sku: '${row.sku}', name: '${row.name}', price: '${row.price}'}\n"
        f"    probe: {probe}\n"
        "  - {name: tell, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {last: '@add.id'}}\n")
    return pool


def args(tmp_path: Path, store: Store, journal: str) -> list[str]:
    return ["--store", store.url, "--token-file", str(token_file(tmp_path / "secret", store)), "--journal",
            journal, "--out", str(tmp_path / "out")]


def night(tmp_path: Path, store: Store, journal: str, *extra: str) -> tuple[int, dict[str, Any]]:
    proc = pooler("run", str(tmp_path / "pools" / "pool.yaml"), *args(tmp_path, store, journal),
                  "--task", "t", "--json", *extra)
    return proc.returncode, json.loads(proc.stdout)


def redrive(tmp_path: Path, store: Store, journal: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return pooler("redrive", "t", *args(tmp_path, store, journal), *extra)


def adds(store: Store) -> Counter[str]:
    """How many times the store carried out CmdAdd for each sku."""
    return Counter(str(op["params"]["sku"]) for op in store.ops() if op["command"] == "CmdAdd")


def goods(store: Store) -> Counter[str]:
    answer = store.call("MELBIS_AGENT_STORE", "CmdList").json()["data"]
    return Counter(str(r["sku"]) for r in answer["tables"]["goods"])


def echoed(store: Store) -> list[dict[str, Any]]:
    return [op["params"] for op in store.ops() if op["command"] == "CmdEcho"]


def faulty_store(tmp_path: Path, request: Any, *args: str, **faults: str) -> Store:
    store = start_store(tmp_path, *args)
    request.addfinalizer(store.stop)
    store.served.server.faults = Once(**faults)
    return store


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_call_whose_answer_was_lost_and_whose_probe_finds_it_landed_is_completed_and_feeds_references(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = faulty_store(tmp_path, request, **{f"CmdAdd_{LAST}": "reset"})
    write_pool(tmp_path)
    code, answer = night(tmp_path, store, journal, "--report", str(tmp_path / "report.html"), "--junit",
                         str(tmp_path / "junit.xml"))
    assert code == 0, answer
    assert (answer["result"], answer["calls_in_doubt"]) == (True, 0)
    assert answer["probes"] == {"landed": 1, "not_landed": 0, "unsettled": 0}
    assert adds(store) == Counter(f"G{i}" for i in range(ROWS))
    # The later step read the id of the row the probe found.
    assert echoed(store) == [{"last": ROWS}]
    show = pooler("show", "t", "--journal", journal)
    assert "; probes: 1 landed, 0 not landed, 0 unsettled" in show.stdout
    html = (tmp_path / "report.html").read_text()
    assert '<dt>probes</dt><dd id="probes">1 landed, 0 not landed,\n    0 unsettled</dd>' in html
    junit = (tmp_path / "junit.xml").read_text()
    for said, count in (("landed", 1), ("not_landed", 0), ("unsettled", 0)):
        assert f'<property name="probes_{said}" value="{count}" />' in junit


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_call_its_probe_proves_not_carried_out_is_sent_again_once_under_its_next_key_round(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    # An HTTP 500 before the command ran: the client cannot know it did not run, but the store's
    # answer says its work on the request was over before the probe read.
    store = faulty_store(tmp_path, request, CmdAdd_G1="crash")
    write_pool(tmp_path)
    code, answer = night(tmp_path, store, journal)
    assert code == 0, answer
    assert answer["probes"] == {"landed": 0, "not_landed": 1, "unsettled": 0}
    assert adds(store) == Counter(f"G{i}" for i in range(ROWS))
    keys = [op["idempotency_key"] for op in store.ops() if op["params"].get("sku") == "G1"]
    # The probe went under no key; the call again under its next round.
    assert keys == [None, "t:goods-G1/2"]


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_call_whose_probe_fails_stays_in_doubt_and_is_not_sent_again(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = faulty_store(tmp_path, request, CmdAdd_G1="reset", CmdGet_G1="crash")
    write_pool(tmp_path)
    code, answer = night(tmp_path, store, journal)
    assert code == 1
    assert answer["calls_in_doubt"] == 1
    assert answer["probes"] == {"landed": 0, "not_landed": 0, "unsettled": 1}
    [left] = answer["steps"][0]["failures"]
    assert (left["row"], left["status"], left["probe"]) == (1, "in_doubt", "unsettled")
    assert left["message"] == (
        f"the store at {store.url}/ closed the connection before answering; the call may or may not have "
        "been carried out. Its probe settled nothing (the probe CmdGet answered MELBIS_AGENT_STORE\\CmdGet "
        "failed: the store broke down (injected fault: crash)): the call stays in doubt.")
    assert adds(store) == Counter(f"G{i}" for i in range(ROWS))


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_redrive_probes_first_the_calls_a_night_left_in_doubt_and_sends_none_that_landed(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = faulty_store(tmp_path, request, CmdAdd_G1="reset", CmdGet_G1="crash")
    write_pool(tmp_path)
    code, _ = night(tmp_path, store, journal)
    assert code == 1
    before = adds(store)
    dry = redrive(tmp_path, store, journal, "--dry-run")
    assert dry.stdout == f"task t: {ROWS - 1} completed: kept; 1 in doubt: probed first; 1 not run: sent\n"
    proc = redrive(tmp_path, store, journal, "--json")
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert (done["result"], done["probes"]) == (True, {"landed": 1, "not_landed": 0, "unsettled": 0})
    assert [(i["row"], i["action"]) for i in done["in_doubt"]] == [(1, "probed")]
    assert adds(store) == before
    # The step that reads the goods step's detail ran now, with the detail of its last row's call.
    assert echoed(store) == [{"last": ROWS}]
    # Told otherwise on the command line, the redrive does what --in-doubt says.
    assert "probed first" not in redrive(tmp_path, store, journal, "--dry-run", "--in-doubt", "skip").stdout


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_night_against_a_store_that_ignores_keys_and_resets_connections_lands_every_row_exactly_once(
        kind: str, tmp_path: Path, request: Any) -> None:
    rows = 300
    journal = journal_of(kind, request, tmp_path)
    store = start_store(tmp_path, "--no-idempotency")
    request.addfinalizer(store.stop)
    # One connection in a hundred reset after the request left: the store carried the call out.
    store.served.server.faults = FaultPlan([Rule("reset", 0.01)], seed=7)
    write_pool(tmp_path, rows)
    code, answer = night(tmp_path, store, journal)
    assert code == 0, answer["steps"][0]["message"]
    assert answer["calls_in_doubt"] == 0
    assert answer["probes"]["landed"] + answer["probes"]["not_landed"] > 0
    assert answer["probes"]["unsettled"] == 0
    store.served.server.faults = None
    assert goods(store) == Counter(f"G{i}" for i in range(rows))


def saved_tools(tmp_path: Path, store: Store) -> Path:
    """The store's tool_list as ``pooler tools --json`` saves it: its goods commands declare their
    detail fields."""
    proc = pooler("tools", "--json", "--store", store.url, "--token-file",
                  str(token_file(tmp_path / "secret", store)))
    path = tmp_path / "shop-tools.json"
    path.write_text(proc.stdout)
    return path


@pytest.mark.parametrize(("probe", "told"), [
    ("{command: CmdGot, params: {sku: '${row.sku}'}, landed: found}",
     ("pools/pool.yaml:9:22: Unknown command [CmdGot] of MELBIS_AGENT_STORE - did you mean CmdGet? The tool "
     "has: CmdAdd, CmdGet, CmdList.")),
    ("{command: CmdGet, params: {sku: '${row.sku}'}, landed: fund, detail: row}",
     ("pools/pool.yaml:9:67: The probe of step 1: landed [fund] is not a field of the detail of "
     "MELBIS_AGENT_STORE.CmdGet - did you mean found? Its detail: found, row.")),
    ("{command: CmdGet, params: {sku: '${row.sku}'}, landed: found, detail: rows}",
     ("pools/pool.yaml:9:82: The probe of step 1: detail [rows] is not a field of the detail of "
     "MELBIS_AGENT_STORE.CmdGet - did you mean row? Its detail: found, row.")),
    ("{unit: MELBIS_AGENT_STOR, command: CmdGet, params: {sku: '${row.sku}'}, landed: found}",
     ("pools/pool.yaml:9:19: No tool [MELBIS_AGENT_STOR] in the store - did you mean MELBIS_AGENT_STORE? "
     "`pooler tools` lists the store's tools.")),
    ("{command: CmdGet, params: {sku: '${row.sku}', skus: x}, landed: found}",
     "pools/pool.yaml:9:58: The command [CmdGet] has no field [skus] - did you mean sku? Its fields: sku."),
    ("{command: CmdGet, params: {sku: '${row.skuu}'}, landed: found}",
     ("pools/pool.yaml:9:44: ${row.skuu} in probe.params.sku of step 1: {tmp}/pools/goods.csv has no field "
     "[skuu] - did you mean sku?")),
])
def test_check_tells_a_bad_probe_against_the_store_at_its_place_and_sends_nothing(
        tmp_path: Path, store: Store, probe: str, told: str) -> None:
    write_pool(tmp_path, probe=probe)
    tools = saved_tools(tmp_path, store)
    before = store.ops()
    proc = pooler("check", "pools/pool.yaml", "--against", str(tools), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[0] == told.replace("{tmp}", str(tmp_path))
    assert store.ops() == before


def test_tool_pool_takes_a_probe_and_settles_a_call_in_doubt_by_it(tmp_path: Path, request: Any) -> None:
    pytest.importorskip("mcp")
    import anyio  # noqa: PLC0415 - only with the MCP extra
    from mcpkit import answer_of, connect_in_process  # noqa: PLC0415

    store = faulty_store(tmp_path, request, CmdAdd_KETTLE="reset")
    pool = {"pool": [
        {"name": "add", "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd", "key": "goods-KETTLE",
         "params": {"sku": "KETTLE", "name": "Kettle", "price": 39.9},
         "probe": {"command": "CmdGet", "params": {"sku": "KETTLE"}, "landed": "found", "detail": "row"}},
        {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"sku": "@add.sku"}}]}

    async def scenario() -> None:
        async with connect_in_process(store, tmp_path / "out") as session:
            answer = answer_of(await session.call_tool("tool_pool", pool))
        assert (answer["result"], answer["probes"]) == (True, {"landed": 1, "not_landed": 0, "unsettled": 0})
        assert answer["steps"][0]["probe"] == "landed"

    anyio.run(scenario)
    assert adds(store) == Counter(["KETTLE"])
    assert echoed(store) == [{"sku": "KETTLE"}]


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_call_settled_by_a_probe_without_detail_stops_a_reference_to_its_detail_as_a_missing_field(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = faulty_store(tmp_path, request, **{f"CmdAdd_{LAST}": "reset"})
    write_pool(tmp_path, probe="{command: CmdGet, params: {sku: '${row.sku}'}, landed: found}")
    code, answer = night(tmp_path, store, journal)
    assert code == 1
    add, tell = answer["steps"]
    assert (add["status"], answer["probes"]["landed"]) == ("completed", 1)
    assert tell["status"] == "failed"
    assert tell["message"] == (f"{tmp_path}/pools/pool.yaml:10:76: @add.id names a field the detail of that "
                               "step does not have. The detail has no fields.")
    assert echoed(store) == []
    assert adds(store) == Counter(f"G{i}" for i in range(ROWS))


def test_a_redrive_plan_tells_the_calls_in_doubt_it_probes_first_apart_from_those_it_sends_by_in_doubt(
        ) -> None:
    plan = RedrivePlan()
    plan.sent.update({"completed": 0, "failed": 37, "in doubt": 6, "not run": 18015})
    plan.kept.update({"completed": 1203, "in doubt": 1})
    plan.probed = 4
    assert plan.text("retry") == ("1,203 completed: kept; 37 failed: sent again; 7 in doubt: 4 probed first, "
                                  "2 sent again under their keys, 1 kept; 18,015 not run: sent")
    plan.sent["in doubt"], plan.kept["in doubt"] = 4, 0
    assert plan.text("retry") == ("1,203 completed: kept; 37 failed: sent again; 4 in doubt: probed first; "
                                  "18,015 not run: sent")


class SlowAdd:
    """The store's engine, with the first CmdAdd held before it runs until the probe of its row has
    been answered: the probe reads while the call that timed out is still running at the store."""

    def __init__(self, store: Store) -> None:
        self.engine = store.served.server.engine
        self.probed = threading.Event()
        self.added = threading.Event()
        self.held = False
        self.tool_run = self.engine.tool_run
        self.engine.tool_run = self.run

    def run(self, token: str | None, request: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        first_add = request.get("command") == "CmdAdd" and not self.held
        if first_add:
            self.held = True
            assert self.probed.wait(120), "the probe never came"
        try:
            return self.tool_run(token, request, *args, **kwargs)
        finally:
            if first_add:
                self.added.set()
            if request.get("command") == "CmdGet":
                self.probed.set()


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_probe_reading_while_a_timed_out_call_still_runs_at_the_store_leaves_it_in_doubt_and_it_lands_once(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    slow = SlowAdd(store)
    write_pool(tmp_path, rows=1)
    code, answer = night(tmp_path, store, journal, "--timeout", "5")
    assert code == 1
    assert (answer["calls_in_doubt"], answer["probes"]) == (1, {"landed": 0, "not_landed": 0, "unsettled": 1})
    [left] = answer["steps"][0]["failures"]
    assert (left["status"], left["probe"]) == ("in_doubt", "unsettled")
    assert left["message"].endswith(" Its probe settled nothing (the probe CmdGet found it not landed, but "
                                    "the call's request lost its answer and may still be running at the "
                                    "store): the call stays in doubt.")
    assert slow.added.wait(120)
    assert adds(store) == Counter(["G0"])
    # Run again, the call is probed first: it landed meanwhile, and is not sent again.
    code, answer = night(tmp_path, store, journal)
    assert code == 0, answer
    assert answer["probes"] == {"landed": 1, "not_landed": 0, "unsettled": 0}
    assert adds(store) == Counter(["G0"])
    show = pooler("show", "t", "--journal", journal)
    assert "; probes: 1 landed, 0 not landed, 0 unsettled" in show.stdout


def age_requests(kind: str, journal: str, seconds: int) -> None:
    """The task's requests made to have left ``seconds`` earlier than they did."""
    if kind == "sqlite":
        with sqlite3.connect(journal) as db:
            db.execute("UPDATE work SET sent_ms = sent_ms - ? WHERE task = 't'", (seconds * 1000,))
        return
    import psycopg  # noqa: PLC0415 - only with the PostgreSQL extra

    with psycopg.connect(journal) as db:
        db.execute("UPDATE work SET sent_at = sent_at - make_interval(secs => %s) WHERE task = 't'",
                   (seconds,))


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_call_found_in_doubt_counts_its_probes_not_landed_only_once_its_request_left_long_enough_ago(
        kind: str, tmp_path: Path, request: Any) -> None:
    journal = journal_of(kind, request, tmp_path)
    # Closed on the wire before the command ran: the answer is lost, nothing landed.
    store = faulty_store(tmp_path, request, CmdAdd_G0="refuse")
    write_pool(tmp_path, rows=1)
    code, answer = night(tmp_path, store, journal)
    assert (code, answer["probes"]) == (1, {"landed": 0, "not_landed": 0, "unsettled": 1})
    # Run again at once: the request that lost its answer may still be running at the store.
    code, answer = night(tmp_path, store, journal)
    assert (code, answer["probes"]) == (1, {"landed": 0, "not_landed": 0, "unsettled": 1})
    [left] = answer["steps"][0]["failures"]
    assert "CmdGet found it not landed, but the call's request left " in left["message"]
    assert " s ago and may still be running at the store; a probe 10 minutes after it left settles it" \
        in left["message"]
    assert adds(store) == Counter()
    age_requests(kind, journal, 601)
    code, answer = night(tmp_path, store, journal)
    assert code == 0, answer
    assert answer["probes"] == {"landed": 0, "not_landed": 1, "unsettled": 0}
    assert adds(store) == Counter(["G0"])
    keys = [op["idempotency_key"] for op in store.ops() if op["command"] == "CmdAdd"]
    assert keys == ["t:goods-G0/2"]
