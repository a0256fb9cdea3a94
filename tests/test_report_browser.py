"""The HTML report opened in headless Chromium: what the rendered page shows, and that it asks for
nothing outside itself.

Runs are real ``pooler run`` processes against the reference store (or a stand-in hostile store);
the 100,000-call task is a journal written straight into SQLite, as a long import leaves it.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import pytest
from browser import Browser, Elements
from helpers import ROOT, Store, answer_of, pooler, send_answer, serve
from junit_schema import jenkins_junit

from pooler.journal.sqlite.journal import Journal

ORDERS = ROOT / "pools" / "orders.yaml"
DEMO = ROOT / "pools" / "demo.yaml"
TIMES = re.compile(r"sent (\S+) · answered (\S+)")


@pytest.fixture
def browser(tmp_path: Path) -> Browser:
    return Browser(tmp_path / "chromium")


def run(store: Store, tmp: Path, pool: Path, *extra: str) -> Any:
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp / "out"), "--journal",
                  str(tmp / "journal.sqlite"), "--report", str(tmp / "report.html"), "--junit",
                  str(tmp / "junit.xml"), "--json", *extra, env={"POOLER_TOKEN": store.token})
    if (tmp / "junit.xml").exists():
        jenkins_junit(tmp / "junit.xml")  # every JUnit file a test makes passes Jenkins' schema
    return proc


def bars(page: Elements) -> list[dict[str, str]]:
    return page.having("rect", "bar")


def spans(page: Elements) -> list[tuple[str, str]]:
    """(sent, answered) of each bar in order, from its hover text."""
    return [tuple(m.groups()) for m in TIMES.finditer(page.all_text())]  # type: ignore[misc]


def test_a_small_completed_pool(store: Store, tmp_path: Path, browser: Browser) -> None:
    proc = run(store, tmp_path, DEMO)
    assert proc.returncode == 0, proc.stderr
    task = answer_of(proc)["task"]
    assert f"pooler: the report of task {task} written to {tmp_path / 'report.html'}" in proc.stderr
    got = browser.open(tmp_path / "report.html")
    page = Elements(got.dom)
    assert got.requests == []
    # The page's own script ran: its hash in the Content-Security-Policy is right.
    assert page.having("html", data_script="ran")
    text = page.all_text()
    assert f"pooler report: task {task} completed" in " ".join(text.split())
    assert "4 in all: 4 completed, 0 failed, 0 in doubt, 0 skipped, 0 not run" in " ".join(text.split())
    assert len(page.having("g", "lane-row")) == 1
    assert [b["class"] for b in bars(page)] == ["tip bar completed"] * 4
    assert [b["data-step"] for b in bars(page)] == ["0", "1", "2", "3"]
    assert page.having("section", id="in-doubt") == []
    assert len(page.having("tr", data_step="1")) == 1
    assert page.having("td", "table-name")
    assert "goods" in text
    assert "step4.MELBIS_AGENT_STORE.CmdList.goods.jsonl" in text
    suite = jenkins_junit(tmp_path / "junit.xml")
    assert suite.get("tests") == "4"
    assert suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase")] == [
        "step 1 cur MELBIS_AGENT_CURRENCY.CmdAdd", "step 2 kettle MELBIS_AGENT_STORE.CmdAdd",
        "step 3 check MELBIS_AGENT_STORE.CmdGet", "step 4 catalogue MELBIS_AGENT_STORE.CmdList"]


def test_a_parallel_pool_with_serialize_on(store: Store, tmp_path: Path, browser: Browser) -> None:
    # A copy, so that the screenshot names no folder of this checkout.
    pools = tmp_path / "pools"
    (pools / "data").mkdir(parents=True)
    shutil.copyfile(ORDERS, pools / "orders.yaml")
    shutil.copyfile(ORDERS.parent / "data" / "orders.csv", pools / "data" / "orders.csv")
    proc = run(store, tmp_path, pools / "orders.yaml")
    assert proc.returncode == 0, proc.stderr
    got = browser.open(tmp_path / "report.html")
    assert got.requests == []
    page = Elements(got.dom)
    assert [g["data-lane"] for g in page.having("g", "lane-row")] == ["1", "2", "3", "4"]
    found = bars(page)
    assert len(found) == 8
    assert {b["class"] for b in found} == {"tip bar completed"}
    # One group per contract, and every bar names its group.
    assert len(page.having("span", "group")) == 3
    assert all("data-group" in b for b in found)
    assert "serialize_on contract" in page.all_text()
    times = spans(page)
    assert len(times) == 8
    by_group: dict[str, list[tuple[str, str]]] = {}
    by_lane: dict[str, list[tuple[str, str]]] = {}
    for bar, sent_answered in zip(found, times, strict=True):
        by_group.setdefault(bar["data-group"], []).append(sent_answered)
        by_lane.setdefault(bar["data-lane"], []).append(sent_answered)
    # Calls of one contract never overlap, nor do two calls of one slot.
    for calls in [*by_group.values(), *by_lane.values()]:
        calls.sort()
        for (_, answered), (sent, _) in pairwise(calls):
            assert sent >= answered
    shot = tmp_path / "report.png"
    assert browser.screenshot(tmp_path / "report.html", shot) == []
    if os.environ.get("POOLER_UPDATE_DOCS") == "1":
        shutil.copyfile(shot, ROOT / "docs" / "report.png")


CLICK = """(() => {
  const bars = document.querySelectorAll("rect.bar");
  const shown = [];
  for (const i of [2, 5]) {
    bars[i].dispatchEvent(new MouseEvent("click", {bubbles: true}));
    shown.push(document.getElementById("detail-1").textContent);
  }
  return {shown, picked: [...document.querySelectorAll("rect.picked")].map(r => [...bars].indexOf(r))};
})()"""


def test_a_click_keeps_a_calls_details_below_the_timeline(store: Store, tmp_path: Path,
                                                         browser: Browser) -> None:
    proc = run(store, tmp_path, ORDERS)
    assert proc.returncode == 0, proc.stderr
    page = Elements((tmp_path / "report.html").read_text(encoding="utf-8"))
    titles = [t for t in page.titles if "\nsent " in t]
    assert len(titles) == 8
    got = browser.evaluate(tmp_path / "report.html", CLICK)
    assert got["picked"] == [5]
    assert got["shown"] == [titles[2], titles[5]]
    assert got["shown"][0].startswith("step 1 order MELBIS_AGENT_ORDER.CmdAdd\nrow ")
    assert "serialize_on" in got["shown"][0]


def _seed(calls: int, lo: int, hi: int) -> tuple[int, int]:
    for seed in range(1000):
        rng = random.Random(seed)
        faults = sum(rng.random() < 0.5 for _ in range(calls))
        if lo <= faults <= hi:
            return seed, faults
    raise AssertionError("no seed")


def test_a_failed_run_with_calls_in_doubt(store_factory: Any, tmp_path: Path, browser: Browser) -> None:
    seed, lost = _seed(8, 2, 4)
    store = store_factory("--fault", "reset:0.5", "--seed", str(seed))
    proc = run(store, tmp_path, ORDERS, "--no-stop-on-error")
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    got = browser.open(tmp_path / "report.html")
    assert got.requests == []
    page = Elements(got.dom)
    text = " ".join(page.all_text().split())
    assert f"{lost} calls in doubt" in text
    assert (f"pooler run {ORDERS} --task {answer['task']} --store {store.url} --out {tmp_path / 'out'} "
            f"--journal {tmp_path / 'journal.sqlite'} --in-doubt skip") in text
    assert page.elements.index(("section", {"class": "doubt", "id": "in-doubt"})) < \
        page.elements.index(("section", {"class": "run", "id": "run-1"}))
    assert len([b for b in bars(page) if b["class"] == "tip bar in_doubt"]) == lost
    assert len([b for b in bars(page) if b["class"] == "tip bar completed"]) == 8 - lost
    assert len(page.having("tr", "failure")) == lost
    assert page.having("span", "badge", id="status")
    assert f"{8 - lost} completed, 0 failed, {lost} in doubt" in text
    case = next(jenkins_junit(tmp_path / "junit.xml").iter("testcase"))
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("type") == "in_doubt"
    assert (failure.text or "").count(": in_doubt: ") == lost


def test_a_100000_call_import(tmp_path: Path, browser: Browser) -> None:
    journal_path = tmp_path / "journal.sqlite"
    make_big_journal(journal_path, "big", calls=100_000, width=8, failed=150, in_doubt=3)
    report = tmp_path / "report.html"
    proc = pooler("show", "big", "--journal", str(journal_path), "--html", str(report))
    assert proc.returncode == 0, proc.stderr
    size = report.stat().st_size
    print(f"100,000-call report: {size:,} bytes")
    assert size < 5 << 20
    got = browser.open(report)
    assert got.requests == []
    page = Elements(got.dom)
    text = " ".join(page.all_text().split())
    assert page.having("svg", "tl", data_mode="aggregated")
    assert len(page.having("g", "lane-row")) == 8
    assert "100,000 in all: 99,847 completed, 150 failed, 3 in doubt" in text
    assert "3 calls in doubt" in text
    assert len(page.having("tr", "failure")) == 100
    assert "and 53 more failed or in-doubt calls" in text
    assert len(page.having("rect")) < 20_000
    assert page.having("rect", "col")  # the chart of calls answered
    row = page.having("tr", data_step="1")
    assert row


def make_big_journal(path: Path, task: str, *, calls: int, width: int, failed: int, in_doubt: int) -> None:
    """A task of one step over rows run ``width`` wide, written in one transaction."""
    Journal(path).close()
    start = 1_796_000_000_000
    rng = random.Random(7)
    free = [start] * width
    bad = set(rng.sample(range(calls), failed + in_doubt))
    doubt = set(sorted(bad)[:in_doubt])
    rows = []
    for i in range(calls):
        lane = min(range(width), key=free.__getitem__)
        sent = free[lane]
        done = sent + rng.randint(2, 9)
        free[lane] = done
        status = "in_doubt" if i in doubt else "failed" if i in bad else "completed"
        body = json.dumps({"num": 1, "name": "goods", "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd",
                           "row": i, "status": status,
                           "message": "Refused: no such SKU" if i in bad else "ok"})
        rows.append((task, 1, 1, i, f"goods-{i}", f"{task}-1-{i}-1", status, "", "", body, lane, sent, done))
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT INTO tasks (id, pool_file, started, status) VALUES (?, ?, ?, 'failed')",
                   (task, "/srv/pools/import.yaml", "2026-12-01T02:00:00.000"))
        steps = json.dumps([{"num": 1, "name": "goods", "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd",
                             "over_rows": True, "key": "goods-${row.sku}"}])
        db.execute("INSERT INTO task_runs VALUES (?, 1, ?, 'http://127.0.0.1:8080', 'parallel', ?, NULL, ?, "
                   "NULL)",
                   (task, start, width, steps))
        db.executemany("INSERT INTO calls (task, run, num, row, key, step_id, status, sent_at, done_at, "
                       "result, lane, sent_ms, done_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.close()


class Counter(BaseHTTPRequestHandler):
    """A server that counts what is asked of it: a page that reaches out shows here."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Counter.hits.append(self.path)
        send_answer(self, 200, "text/plain", b"")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""


@pytest.fixture
def counter() -> Iterator[str]:
    Counter.hits = []
    with serve(Counter) as url:
        yield url


def hostile(bait: str) -> type[BaseHTTPRequestHandler]:
    class Hostile(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.dumps({"ok": True, "ms": 1, "data": {
                "result": False, "message": bait, "detail": {},
                "tables": {"<script>window.PWNED=1</script>": [{"a": 1}]}, "files": []}})
            send_answer(self, 200, "application/json", body.encode())

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            """Quiet."""

    return Hostile


def test_a_hostile_stores_script_is_text(tmp_path: Path, browser: Browser, counter: str) -> None:
    bait = (f'<img src="{counter}/img" onerror="document.title=1">'
            f'<script src="{counter}/script.js"></script><link rel=stylesheet href="{counter}/css">')
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - unit: MELBIS_AGENT_TEST\n    command: CmdEcho\n", encoding="utf-8")
    with serve(hostile(bait)) as url:
        proc = pooler("run", str(pool), "--store", url, "--out", str(tmp_path / "out"), "--journal",
                      str(tmp_path / "journal.sqlite"), "--report", str(tmp_path / "report.html"),
                      env={"POOLER_TOKEN": "t"})
    assert proc.returncode == 1, proc.stderr
    got = browser.open(tmp_path / "report.html")
    page = Elements(got.dom)
    assert got.requests == []
    assert Counter.hits == []
    assert len(page.having("script")) == 1
    assert page.having("img") == []
    assert page.having("link") == []
    assert "<script>window.PWNED=1</script>" in page.all_text()
    assert bait in page.all_text()
    assert "&lt;script&gt;window.PWNED=1&lt;/script&gt;" in got.dom
    # The same text put in a page as markup does reach out: the checks above would see it.
    control = tmp_path / "control.html"
    control.write_text(f"<!DOCTYPE html><html><body>{bait}</body></html>", encoding="utf-8")
    seen = browser.open(control)
    assert seen.requests
    assert Counter.hits
