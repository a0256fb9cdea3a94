"""How a run looks: plain timestamped lines off a terminal, a live view on one."""

from __future__ import annotations

import io
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, on_terminal

from pooler.cli.live import LiveReporter
from pooler.cli.render import (
    FanOut,
    PlainReporter,
    answer_lines,
    call_line,
    console_for,
    make_reporter,
    summary_line,
)
from pooler.cli.results import results_table
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor

CUR = Step(num=1, unit="MELBIS_AGENT_CURRENCY", command="CmdAdd", name="cur")
ROWS = Step(num=2, unit="MELBIS_AGENT_STORE", command="CmdAdd", name="add")
POOL = Pool(file="pools/x.yaml", steps=[CUR, ROWS])
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def fixed_clock() -> datetime:
    return datetime(2026, 11, 30, 12, 0, 1)


def done(**extra: Any) -> dict[str, Any]:
    return {"status": "completed", "result": True, "message": "ok", "time": {"server": 3, "trip": 12},
            **extra}


def answer(**extra: Any) -> dict[str, Any]:
    base = {"result": True, "status": "completed", "total": 2, "succeeded": 2, "failed": 0, "skipped": 0,
            "not_run": 0, "in_doubt": [], "task": "t-1", "time": {"trip": 145},
            "steps": [{"num": 1, "name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
                       **done()}]}
    return {**base, **extra}


def test_call_lines_read_like_a_cron_log() -> None:
    # The counter counts calls; the step is named by its own number.
    assert call_line(2, 5, CUR, done()) == "call 2/5 step 1 cur MELBIS_AGENT_CURRENCY.CmdAdd completed 12 ms"
    assert (call_line(3, 5, ROWS, done(row=7, key="goods-A")) ==
            "call 3/5 step 2 add MELBIS_AGENT_STORE.CmdAdd row 7 completed 12 ms key goods-A")
    assert (call_line(4, 5, ROWS, done(rows=[0, 499])) ==
            "call 4/5 step 2 add MELBIS_AGENT_STORE.CmdAdd rows 0-499 completed 12 ms")
    failed = {"status": "failed", "result": False, "message": "Unknown command [CmdAdd]"}
    assert (call_line(5, 5, Step(num=3, unit="U", command="C"), failed) ==
            "call 5/5 step 3 U.C failed: Unknown command [CmdAdd]")
    again = done(key="order-1", sent_again="t-1-1-1")
    assert call_line(1, 1, CUR, again) == (
        "call 1/1 step 1 cur MELBIS_AGENT_CURRENCY.CmdAdd completed 12 ms key order-1 (sent again: the call "
        "t-1-1-1 was in doubt; a store that ignores Idempotency-Key may have carried it out twice)")


def test_summary_line() -> None:
    assert summary_line(answer()) == ("pool completed: 2 calls: 2 succeeded, 0 failed, 0 skipped, "
                                      "0 in doubt, 0 not run in 145 ms")
    one = answer(total=1, result=False, status="failed", succeeded=0, failed=1, calls_in_doubt=1,
                 in_doubt=[{"num": 1, "action": "left"}])
    # The in-doubt call is told apart from the failed ones, and the counts add up to the calls.
    assert summary_line(one) == ("pool failed: 1 call: 0 succeeded, 0 failed, 0 skipped, 1 in doubt, "
                                 "0 not run in 145 ms")
    stopped = answer(result=False, status="partial", succeeded=1, not_run=1, interrupted="SIGTERM",
                     in_doubt=[{"num": 2, "action": "retried"}])
    assert summary_line(stopped, POOL) == (
        "pool partial (interrupted by SIGTERM): 2 calls: 1 succeeded, 0 failed, 0 skipped, 0 in doubt, "
        "1 not run in 145 ms; 1 call found in doubt from an earlier run; to continue: --task t-1 --resume "
        "(it sends again the unkeyed step already done: 1 cur; give it a key to have it skipped)")


def test_the_resume_hint_says_what_a_resume_repeats_or_why_it_would_not_help() -> None:
    keyed = Pool(file="pools/k.yaml", steps=[Step(num=1, unit="U", command="C", name="cur", key="k"), ROWS])
    stopped = answer(result=False, status="partial", succeeded=1, failed=1)
    assert summary_line(stopped, keyed).endswith(
        "; to continue: --task t-1 --resume (keyed calls already done are skipped)")
    assert summary_line(answer(), keyed) == summary_line(answer())  # a completed run needs none
    denied = {"num": 1, "name": "cur", "unit": "U", "command": "C", "status": "failed", "result": False,
              "message": "ACCESS_DENIED: the token is not known"}
    refused = answer(result=False, status="failed", succeeded=0, failed=2, steps=[denied])
    assert summary_line(refused, keyed).endswith(
        "; the store refused the token (ACCESS_DENIED): a resume would meet the same refusal - fix the "
        "token, then continue with --task t-1 --resume")
    nothing_done = answer(result=False, status="failed", succeeded=0, failed=1,
                          steps=[{**denied, "message": "no"}])
    assert summary_line(nothing_done, POOL).endswith("; to continue: --task t-1 --resume")


def test_plain_reporter_writes_one_stamped_line_per_call() -> None:
    out = io.StringIO()
    reporter = PlainReporter(out, Redactor(["hush-hush"]), clock=fixed_clock)
    reporter.pool_started(POOL, "t-1", 2)
    reporter.step_started(CUR, 1)
    reporter.step_finished(CUR, done(message="said hush-hush"))
    reporter.rows_progress(ROWS, 1, 1)
    reporter.step_finished(ROWS, {"status": "failed", "result": False, "message": "no: hush-hush"})
    reporter.pool_finished(answer(result=False, status="partial", succeeded=1, failed=1))
    assert out.getvalue().splitlines() == [
        "2026-11-30T12:00:01 pool pools/x.yaml task t-1: 2 calls planned",
        "2026-11-30T12:00:01 call 1/2 step 1 cur MELBIS_AGENT_CURRENCY.CmdAdd completed 12 ms",
        "2026-11-30T12:00:01 call 2/2 step 2 add MELBIS_AGENT_STORE.CmdAdd failed: no: ***",
        ("2026-11-30T12:00:01 pool partial: 2 calls: 1 succeeded, 1 failed, 0 skipped, 0 in doubt, 0 not run "
         "in 145 ms; to continue: --task t-1 --resume (it sends again the unkeyed step already done: 1 cur; "
         "give it a key to have it skipped)"),
    ]


def test_quiet_keeps_only_failures() -> None:
    out = io.StringIO()
    reporter = PlainReporter(out, Redactor(), quiet=True, clock=fixed_clock)
    reporter.pool_started(POOL, "t-1", 2)
    reporter.step_finished(CUR, done())
    reporter.pool_finished(answer())
    assert out.getvalue() == ""
    reporter.step_finished(ROWS, {"status": "in_doubt", "result": False, "message": "lost"})
    assert out.getvalue() == ("2026-11-30T12:00:01 call 2/2 step 2 add MELBIS_AGENT_STORE.CmdAdd "
                              "in_doubt: lost\n")


def test_live_view_draws_a_bar_and_ends_with_a_results_table() -> None:
    out = io.StringIO()
    console = console_for(out, tty=True)
    console.width = 140
    reporter = LiveReporter(console, Redactor(["hush-hush"]))
    reporter.pool_started(POOL, "t-1", 3)
    reporter.step_started(CUR, 1)
    reporter.step_finished(CUR, done())
    reporter.step_started(ROWS, 2)
    reporter.rows_progress(ROWS, 1, 2)
    reporter.step_finished(ROWS, {"status": "failed", "result": False, "message": "refused hush-hush",
                                  "row": 1})
    reporter.pool_finished(answer(result=False, status="partial", total=3, succeeded=1, failed=1, not_run=1))
    text = ANSI.sub("", out.getvalue())
    assert "pool pools/x.yaml  task t-1" in text
    assert "━" in text  # the bar
    assert re.search(r"calls\s.*2/3", text)
    assert "rows of add" in text
    assert "add MELBIS_AGENT_STORE.CmdAdd row 1 failed: refused ***" in text
    assert re.search(r"\s1 │ cur\s+│ MELBIS_AGENT_CURRENCY\.CmdAdd │ completed │\s+12 │ ok", text)
    assert "pool partial: 3 calls: 1 succeeded, 1 failed" in text
    assert "hush-hush" not in text
    assert "\x1b[" in out.getvalue()  # a terminal gets colour


def test_make_reporter_picks_by_terminal_and_tees_to_the_log() -> None:
    assert isinstance(make_reporter(io.StringIO(), Redactor()), PlainReporter)
    assert isinstance(make_reporter(io.StringIO(), Redactor(), tty=True), LiveReporter)
    log = io.StringIO()
    both = make_reporter(io.StringIO(), Redactor(), quiet=True, log=log)
    assert isinstance(both, FanOut)
    both.pool_started(POOL, "t-9", 1)
    both.step_finished(CUR, done())
    both.pool_finished(answer())
    # The log gets every line even when the screen is quiet.
    assert len(log.getvalue().splitlines()) == 3


def test_answer_lines_for_show() -> None:
    lines = answer_lines(answer())
    assert lines == ["1. cur MELBIS_AGENT_CURRENCY.CmdAdd completed 12 ms: ok",
                     ("pool completed: 2 calls: 2 succeeded, 0 failed, 0 skipped, 0 in doubt, 0 not run "
                      "in 145 ms")]


def test_a_step_over_rows_shows_its_summary_then_the_failures_it_lists() -> None:
    head = {"num": 2, "name": "add", "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd"}
    summary = {**head, "status": "failed", "key": None, "result": False,
               "message": "1,000 rows: 996 completed, 4 failed (first at row 17)",
               "rows": {"total": 1000, "completed": 996, "skipped": 0, "failed": 4, "in_doubt": 0,
                        "not_run": 0},
               "calls": 1000, "tables": {}, "failures_omitted": 3, "time": {"trip": 5230},
               "failures": [{**head, "row": 17, "status": "failed", "key": "k17", "result": False,
                             "message": "refused", "time": {"trip": 4}}]}
    got = answer(result=False, status="partial", total=1001, succeeded=997, failed=4,
                 steps=[*answer()["steps"], summary])
    assert answer_lines(got)[1:4] == [
        ("2. add MELBIS_AGENT_STORE.CmdAdd failed 5230 ms: 1,000 rows: 996 completed, 4 failed "
         "(first at row 17)"),
        "2. add MELBIS_AGENT_STORE.CmdAdd row 17 failed 4 ms: refused",
        "2. add MELBIS_AGENT_STORE.CmdAdd failed: 3 more failed or in-doubt calls: the journal has them all"]
    console = console_for(io.StringIO(), tty=False)
    console.width = 200
    with console.capture() as captured:
        console.print(results_table(got))
    text = captured.get()
    assert re.search(r"\s2 │ add row 17\s+│ MELBIS_AGENT_STORE\.CmdAdd\s+│ failed\s+│\s+4 │ refused",
                     text), text


@pytest.mark.process
def test_a_run_on_a_terminal_shows_the_live_view(store: Store, tmp_path: Path) -> None:
    status, raw = on_terminal(["run", str(ROOT / "pools" / "currency.json"), "--store", store.url,
                               "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "j.sqlite")],
                              store.token, 140, rows=40)
    assert status == 0
    text = ANSI.sub("", raw)
    assert "\x1b[" in raw
    assert "━" in text
    assert "results" in text
    assert re.search(r"\s2 │\s+│ MELBIS_AGENT_CURRENCY\.CmdPos\s+│ completed │", text), text
    assert "pool completed: 2 calls: 2 succeeded" in text
    assert not re.search(r"^\d{4}-\d\d-\d\dT", text, re.M)  # no plain lines on a terminal


def test_store_text_is_never_read_as_markup() -> None:
    out = io.StringIO()
    console = console_for(out, tty=True)
    console.width = 140
    step = {"num": 1, "name": "[x]", "unit": "U", "command": "C", "status": "failed",
            "message": "Unknown command [CmdNope] [bold]"}
    console.print(results_table({"steps": [step]}))
    text = ANSI.sub("", out.getvalue())
    assert "Unknown command [CmdNope] [bold]" in text
    assert "│ [x]  │" in text
