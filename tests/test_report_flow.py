"""The HTML report's flow control: per run with flow records, the calls started, the width, the
waits and the busy and gateway answers a second over its runners, a mark and a listed line for
each event, and the line that sums the run up; nothing of it for a run without one.  A real task
run against the reference store on either journal, its flow records written as the runner
writes them (``record_flow``), the page made by ``pooler show --html``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from browser import Elements
from helpers import Store, pooler
from sharedkit import journal_of, run_here, write_pool

from pooler.journal.opening import open_journal
from pooler.journal.records import FlowDoc

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
#: The second the flow records start at (epoch): the report tells it in local time.
S = 1_800_000_000

RUNNER_A: FlowDoc = {
    "run": 0, "runner": "runner-a",
    # second, started, busy, gateway, never reached the store, ms waited, width at its end
    "seconds": [[S, 4, 0, 0, 0, 0, 2], [S + 1, 6, 2, 1, 0, 500, 1], [S + 3, 3, 0, 0, 1, 1000, 2]],
    "events": [{"at": S + 1.25, "what": "cut", "line": "width 2 -> 1: a busy answer (429)"},
               {"at": S + 3.5, "what": "breaker open",
                "line": "the store did not answer 3 times: no call for 5 s"}],
    "throttled_ms": 1500, "highest": 2, "final": 2, "busy": 2, "trips": 1}
RUNNER_B: FlowDoc = {
    "run": 0, "runner": "runner-b",
    "seconds": [[S + 1, 5, 1, 0, 0, 250, 3], [S + 2, 5, 0, 0, 0, 0, 3]],
    "events": [{"at": S + 1.5, "what": "pause", "line": "Retry-After 2 s: every new call waits"}],
    "throttled_ms": 300, "highest": 3, "final": 3, "busy": 1, "trips": 0}


def hms(second: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(second))


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(int(at))) + f".{round(at * 1000) % 1000:03d}"


def report(kind: str, request: Any, store: Store, tmp_path: Path,
           flows: tuple[FlowDoc, ...] = (RUNNER_A, RUNNER_B)) -> Elements:
    """A task of two runs: the first with the runners' flow records, the second with none."""
    journal = journal_of(kind, request, tmp_path)
    pool = write_pool(tmp_path / "pools", ["pool:"] + [
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, key: flow-{n}, params: {{n: {n}}}}}"
        for n in range(3)])
    for run in (1, 2):
        code, _, err = run_here(pool, store, journal, "t", tmp_path / f"out{run}")
        assert code == 0, err
        if run == 1:
            tasks = open_journal(journal)
            try:
                for flow in flows:
                    tasks.record_flow("t", flow)
            finally:
                tasks.close()
    page = tmp_path / "r.html"
    shown = pooler("show", "t", "--journal", journal, "--html", str(page))
    assert shown.returncode == 0, shown.stderr
    return Elements(page.read_text(encoding="utf-8"))


def texts(page: Elements, cls: str) -> list[str]:
    """The hover texts of the flow graph's bars of class ``cls``, in page order."""
    titles = iter(page.titles)
    found: list[str] = []
    # Every rect.tip holds its title: walk the tips and their titles side by side.
    for tag, attrs in page.elements:
        if tag == "rect" and "tip" in attrs.get("class", "").split():
            title = next(titles)
            if cls in attrs["class"].split():
                found.append(title)
    return found


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_run_with_flow_records_shows_its_rate_width_waits_busy_answers_and_events(
        kind: str, request: Any, store: Store, tmp_path: Path) -> None:
    page = report(kind, request, store, tmp_path)
    assert [s["id"] for s in page.having("section", "run")] == ["run-2", "run-1"]
    # The second run kept no flow record: it shows none.
    assert [d["id"] for d in page.having("div", "flow")] == ["flow-1"]
    assert page.having("svg", "fl", id="flowgraph-1")
    assert f"{stamp(S)} to {stamp(S + 4)}: what the run's 2 runners with a flow record did" in " ".join(
        page.all_text().split())
    summary = page.all_text().split("Flow control", 1)[1].strip().split("\n", 1)[0]
    assert summary == ("throttled for 1.8 s in all, highest width 5, final width 5, 3 busy answers, "
                       "breaker opened 1 time")
    # Over both runners, a column a second from S to S + 3.
    assert texts(page, "started") == [f"{hms(S)}: 4 calls started", f"{hms(S + 1)}: 11 calls started",
                                      f"{hms(S + 2)}: 5 calls started", f"{hms(S + 3)}: 3 calls started"]
    # Runner b holds its width 3 from its first second to its last; runner a its 1 through S + 2.
    assert texts(page, "width") == [f"{hms(S)}: width 2 at its end", f"{hms(S + 1)}: width 4 at its end",
                                    f"{hms(S + 2)}: width 4 at its end", f"{hms(S + 3)}: width 2 at its end"]
    assert [p["d"] for p in page.having("path", "level")] == [
        "M0 108.0 H275.0 V84.0 H550.0 V84.0 H825.0 V108.0 H1100.0"]
    assert texts(page, "waited") == [f"{hms(S + 1)}: calls waited 750 ms",
                                     f"{hms(S + 3)}: calls waited 1,000 ms"]
    busy = f"{hms(S + 1)}: 3 busy answers (429), 1 gateway answer, 0 requests that never reached the store"
    assert texts(page, "busy") == [busy]
    assert texts(page, "gateway") == [busy]
    tallest = page.having("rect", "started")
    assert [b["height"] for b in tallest if "tip" in b["class"]] == ["17.5", "48", "21.8", "13.1"]
    # A mark two pixels wide at each event, 275 pixels a second from S (centred on it).
    marks = page.having("rect", "mark", width="2")
    assert [(m["class"], m["x"]) for m in marks] == [
        ("tip mark cut", "342.8"), ("tip mark pause", "411.5"), ("tip mark breaker-open", "961.5")]
    assert texts(page, "mark") == [
        f"{stamp(S + 1.25)} cut (runner-a): width 2 -> 1: a busy answer (429)",
        f"{stamp(S + 1.5)} pause (runner-b): Retry-After 2 s: every new call waits",
        f"{stamp(S + 3.5)} breaker open (runner-a): the store did not answer 3 times: no call for 5 s"]
    listed = page.all_text().split("what happened", 1)[1].split("Steps", 1)[0]
    assert [line for line in listed.split("\n") if line] == [
        f"{stamp(S + 1.25)}cutrunner-awidth 2 -> 1: a busy answer (429)",
        f"{stamp(S + 1.5)}pauserunner-bRetry-After 2 s: every new call waits",
        f"{stamp(S + 3.5)}breaker openrunner-athe store did not answer 3 times: no call for 5 s"]


def test_a_long_run_adds_its_seconds_up_into_columns_the_page_can_hold(store: Store, tmp_path: Path,
                                                                          request: Any) -> None:
    # 3,300 seconds over 1,100 pixels: a column of 6 seconds (2 pixels at least).
    steady: FlowDoc = {"run": 0, "runner": "runner-a",
                       "seconds": [[S + i, 2, 0, 0, 0, 30, 4] for i in range(3300)], "events": [],
                       "throttled_ms": 99_000, "highest": 4, "final": 4, "busy": 0, "trips": 0}
    page = report("sqlite", request, store, tmp_path, (steady,))
    started = texts(page, "started")
    assert len(started) == 550
    assert started[0] == f"{hms(S)} to {hms(S + 5)}: 2 calls started a second"
    assert texts(page, "waited")[-1] == f"{hms(S + 3294)} to {hms(S + 3299)}: calls waited 30 ms a second"
    assert "each column 6 seconds (a second on average)" in " ".join(page.all_text().split())
    assert page.having("table", "flow-events") == []
    summary = page.all_text().split("Flow control", 1)[1].strip().split("\n", 1)[0]
    assert summary == ("throttled for 99.0 s in all, highest width 4, final width 4, 0 busy answers, "
                       "breaker opened 0 times")


def test_a_flow_record_of_no_second_shows_its_summary_alone(store: Store, tmp_path: Path,
                                                            request: Any) -> None:
    # A runner that never started a call (the store down from the start) has its summary only.
    idle: FlowDoc = {"run": 0, "runner": "runner-a", "seconds": [], "events": [], "throttled_ms": 0,
                     "highest": 2, "final": 1, "busy": 0, "trips": 0}
    page = report("sqlite", request, store, tmp_path, (idle,))
    assert [d["id"] for d in page.having("div", "flow")] == ["flow-1"]
    assert page.having("svg", "fl") == []
    assert page.having("p", "flow-summary", id="flow-summary-1")
    assert ("throttled for 0.0 s in all, highest width 2, final width 1, 0 busy answers, breaker opened "
            "0 times") in page.all_text()
