"""Error budgets (``tolerate``): within its budget a night goes on whatever stop_on_error says,
sends every row once and exits 0, its failures listed; over it the pool stops as stop_on_error
does, exits 1, and what it did not run is left to a redrive.  On either journal, against the
reference store, counting what it carried out."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler, start_store
from hypothesis import given, settings
from hypothesis import strategies as st
from junit_schema import jenkins_junit
from sharedkit import journal_of, query, run_here, together, token_file

from pooler.pool.budget import Counts, Tolerate, allowance, budgets_of
from pooler.store.faults import FaultPlan, Rule

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]
ROWS = 100


def goods_pool(folder: Path, every: int | None, head: str, *, step: str = "") -> Path:
    """A pool of ``ROWS`` goods, every ``every``-th row naming the sku of the row before it: the
    store refuses it (proven not carried out), as it holds that sku already.  None: no such row."""
    folder.mkdir(exist_ok=True)
    lines = []
    for i in range(ROWS):
        sku = f"G{i - 1}" if every and i % every == 1 else f"G{i}"
        lines.append(f"{i},{sku},Goods {i},{i}.50\n")
    (folder / "goods.csv").write_text("n,sku,name,price\n" + "".join(lines))
    pool = folder / "pool.yaml"
    pool.write_text(
        head +
        "pool:\n"
        "  - name: add\n"
        "    unit: MELBIS_AGENT_STORE\n"
        "    command: CmdAdd\n"
        "    for_each: {file: goods.csv}\n"
        "    key: goods-${row.n}\n"
        "    params: {sku: '${row.sku}', name: '${row.name}', price: '${row.price}'}\n" + step)
    return pool


def run(tmp_path: Path, store: Store, journal: str, pool: Path, *extra: str
        ) -> tuple[int, dict[str, Any], str]:
    return run_here(pool, store, journal, "t", tmp_path / "out", *extra)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Store]:
    """The reference store of one test."""
    store = start_store(tmp_path)
    yield store
    store.stop()


def adds(store: Store) -> int:
    return sum(1 for op in store.ops() if op["command"] == "CmdAdd" and op["unit"] == "MELBIS_AGENT_STORE")


@pytest.mark.parametrize("kind", JOURNALS)
def test_within_its_budget_a_night_sends_every_row_lists_its_failures_and_exits_0(
        kind: str, tmp_path: Path, request: Any, shop: Store) -> None:
    journal, store = journal_of(kind, request, tmp_path), shop
    # 5 % of the rows refused, a budget of 10 %, stop_on_error as it is by default, calls side by side.
    pool = goods_pool(tmp_path / "pools", 20, "tolerate: {failed: 10%}\nmode: parallel\n")
    junit = tmp_path / "night.xml"
    code, answer, err = run(tmp_path, store, journal, pool, "--junit", str(junit))
    assert code == 0, err
    assert adds(store) == ROWS
    assert (answer["result"], answer["status"], answer["succeeded"], answer["failed"], answer["not_run"]) == (
        False, "partial", 95, 5, 0)
    assert answer["tolerated"] == {"failed": 5, "in_doubt": 0, "within": True, "budgets": [
        {"kind": "failed", "step": None, "tolerate": "10%", "calls": 5, "allowed": 10, "planned": 100,
         "within": True}]}
    failures = answer["steps"][0]["failures"]
    # Side by side, either row of a pair that names one sku may be the one refused.
    assert sorted(f["row"] // 20 for f in failures) == [0, 1, 2, 3, 4]
    assert {f["message"].split(" are in")[0] for f in failures} == {
        f"The goods [G{i}]" for i in (0, 20, 40, 60, 80)}
    assert ("pool partial: 100 calls: 95 succeeded, 5 failed, 0 skipped, 0 in doubt, 0 not run in "
            in err)
    assert ("; 5 of 100 calls failed, within the pool's budget of 10 (tolerate failed: 10%); "
            "`pooler redrive t` sends them again\n") in err
    suite = jenkins_junit(junit).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("1", "0")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["tolerated.failed"] == (
        "5 of 100 calls failed, within the pool's budget of 10 (tolerate failed: 10%)")
    out = suite.find("testcase/system-out")
    assert out is not None
    assert out.text is not None
    assert out.text.startswith("within the error budget: 100 rows: 95 completed, 5 failed")
    # The report says it too, from the journal alone.
    report = tmp_path / "night.html"
    shown = pooler("show", "t", "--journal", journal, "--html", str(report))
    assert shown.returncode == 0, shown.stderr
    assert ("error budget</dt><dd class=\"budget within\">5 of 100 calls failed, within the pool&#39;s "
            "budget of 10 (tolerate failed: 10%)") in report.read_text()


@pytest.mark.parametrize("kind", JOURNALS)
def test_over_its_budget_the_pool_stops_exits_1_and_what_it_did_not_run_is_left_to_a_redrive(
        kind: str, tmp_path: Path, request: Any, shop: Store) -> None:
    journal, store = journal_of(kind, request, tmp_path), shop
    # 20 % refused; stop_on_error false, which the budget overrules once it is passed.
    pool = goods_pool(tmp_path / "pools", 5, "tolerate: {failed: 10%}\nstop_on_error: false\n")
    code, answer, err = run(tmp_path, store, journal, pool)
    assert code == 1
    # One at a time: the 11th refusal is row 51, and nothing after it is sent.
    sent = adds(store)
    assert sent == 52
    assert (answer["succeeded"], answer["failed"], answer["not_run"]) == (41, 11, 48)
    assert answer["tolerated"]["within"] is False
    assert answer["tolerated"]["budgets"][0] | {} == {
        "kind": "failed", "step": None, "tolerate": "10%", "calls": 11, "allowed": 10, "planned": 100,
        "within": False}
    assert "; 11 of 100 calls failed, over the pool's budget of 10 (tolerate failed: 10%); to continue" in err
    dry = pooler("redrive", "t", "--journal", journal, "--store", store.url, "--token-file",
                 str(token_file(tmp_path / "secret", store)), "--dry-run")
    assert (dry.returncode, dry.stdout) == (
        0, "task t: 41 completed: kept; 11 failed: sent again; 48 not run: sent\n")
    assert adds(store) == sent


def test_a_steps_budget_wins_over_the_pools_and_the_pools_counts_the_other_steps(
        tmp_path: Path, shop: Store) -> None:
    store = shop
    pool = goods_pool(tmp_path / "pools", 20, "tolerate: {failed: 0}\nstop_on_error: false\n",
                      step="    tolerate: {failed: 5}\n"
                           "  - {name: bad, unit: MELBIS_AGENT_TEST, command: CmdFail, params: {}}\n"
                           "  - {name: last, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {a: 1}}\n")
    code, answer, _ = run(tmp_path, store, str(tmp_path / "j.db"), pool)
    # Five refusals are within step 1's own five; the pool's none stops the pool at step 2's one.
    assert code == 1
    assert adds(store) == ROWS
    assert [(s["name"], s["status"]) for s in answer["steps"]] == [("add", "failed"), ("bad", "failed")]
    assert answer["not_run"] == 1
    assert answer["tolerated"]["budgets"] == [
        {"kind": "failed", "step": 1, "tolerate": 5, "calls": 5, "allowed": 5, "planned": 100,
         "within": True},
        {"kind": "failed", "step": None, "tolerate": 0, "calls": 1, "allowed": 0, "planned": 2,
         "within": False}]
    assert Counter(op["command"] for op in store.ops() if op["unit"] == "MELBIS_AGENT_TEST") == {"CmdFail": 1}


def test_a_budget_of_calls_in_doubt_lets_a_night_of_lost_answers_go_on(tmp_path: Path, shop: Store) -> None:
    store = shop
    # The store carries some calls out and resets their connection before it answers.
    store.served.server.faults = FaultPlan([Rule("reset", 0.3)], seed=11)
    pool = goods_pool(tmp_path / "pools", None, "tolerate: {in_doubt: 100%}\n")
    code, answer, err = run(tmp_path, store, str(tmp_path / "j.db"), pool)
    assert code == 0, err
    doubted = answer["calls_in_doubt"]
    assert doubted > 0
    assert adds(store) == ROWS
    assert answer["tolerated"] == {"failed": 0, "in_doubt": doubted, "within": True, "budgets": [
        {"kind": "in_doubt", "step": None, "tolerate": "100%", "calls": doubted, "allowed": ROWS,
         "planned": ROWS, "within": True}]}
    assert (f"{doubted} of 100 calls ended in doubt, within the pool's budget of 100 "
            "(tolerate in_doubt: 100%)") in err


def test_check_and_a_dry_run_tell_the_budgets_in_calls(tmp_path: Path) -> None:
    pool = goods_pool(tmp_path, 20, "tolerate: {failed: 2.5%, in_doubt: 3}\n",
                      step="    tolerate: {failed: 1}\n"
                           "  - {name: last, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {a: 1}}\n")
    checked = pooler("check", str(pool), "--data")
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, (
        f"{pool}: step 1 goes on after up to 1 of its 100 calls failed\n"
        f"{pool}: the pool goes on after up to 0 of its 1 calls failed (tolerate failed: 2.5%)\n"
        f"{pool}: the pool goes on after up to 3 of its 101 calls in doubt\n"
        "1 file valid\n"))
    unread = pooler("check", str(pool))
    # Without --data the rows are not counted: the budgets of a step over them are told as written.
    assert (unread.returncode, unread.stdout + unread.stderr) == (0, (
        f"{pool}: step 1 goes on after up to 1 of its calls failed\n"
        f"{pool}: the pool goes on after up to 0 of its 1 calls failed (tolerate failed: 2.5%)\n"
        f"{pool}: the pool goes on after up to 3 of its calls in doubt\n"
        "1 file valid\n"))
    dry = pooler("run", str(pool), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[1] == (
        "order: sequential: one call at a time, in step order; stops at the first failure that no "
        "budget counts; step 1 goes on after up to 1 of its 100 calls failed; the pool goes on after up to 0 "
        "of its 1 calls failed (tolerate failed: 2.5%); the pool goes on after up to 3 of its 101 calls "
        "in doubt")
    plan = json.loads(pooler("run", str(pool), "--dry-run", "--json").stdout)
    assert plan["tolerate"] == [
        {"kind": "failed", "step": 1, "tolerate": 1, "allowed": 1, "planned": 100},
        {"kind": "failed", "step": None, "tolerate": "2.5%", "allowed": 0, "planned": 1},
        {"kind": "in_doubt", "step": None, "tolerate": 3, "allowed": 3, "planned": 101}]


@pytest.mark.postgres
@pytest.mark.process
def test_two_runners_of_a_shared_task_count_against_one_budget(tmp_path: Path, request: Any,
                                                                shop: Store) -> None:
    journal, store = journal_of("postgres", request, tmp_path), shop
    # Half the rows refused, four calls at once across the task, 20 failures allowed in all.
    pool = goods_pool(tmp_path / "pools", 2, "tolerate: {failed: 20}\nmode: parallel\nmax_concurrency: 4\n")
    ends = together(pool, store, journal, "t", tmp_path)
    assert [code for code, _, _ in ends] == [1, 1], [err for _, _, err in ends]
    counted = query(journal, "SELECT count(*) FROM work WHERE task = 't' AND status = 'failed'")[0][0]
    # The 21st failure either runner recorded stopped both; the calls in flight then (four at
    # most) finished. Budgets of a runner each would have let through 40.
    assert 21 <= counted <= 25
    assert adds(store) < ROWS
    # Each tells the count as the journal had it when it ended.
    assert all(" of 100 calls failed, over the pool's budget of 20;" in err for _, _, err in ends)


def one_call_pool(folder: Path, head: str, step: str) -> Path:
    folder.mkdir(exist_ok=True)
    pool = folder / "pool.yaml"
    pool.write_text(head + "pool:\n" + step)
    return pool


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_percent_budget_does_not_tolerate_the_one_call_of_a_pool_failing(
        kind: str, tmp_path: Path, request: Any, shop: Store) -> None:
    journal, store = journal_of(kind, request, tmp_path), shop
    pool = one_call_pool(tmp_path / "pools", "tolerate: {failed: 1%}\n",
                         "  - {name: bad, unit: MELBIS_AGENT_TEST, command: CmdFail}\n")
    junit = tmp_path / "night.xml"
    code, answer, err = run(tmp_path, store, journal, pool, "--junit", str(junit))
    assert code == 1, err
    assert answer["tolerated"]["budgets"] == [
        {"kind": "failed", "step": None, "tolerate": "1%", "calls": 1, "allowed": 0, "planned": 1,
         "within": False}]
    assert "1 of 1 calls failed, over the pool's budget of 0 (tolerate failed: 1%)" in err
    suite = jenkins_junit(junit).find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "1"


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_percent_budget_does_not_let_a_sampled_chunked_import_pass_when_every_call_failed(
        kind: str, tmp_path: Path, request: Any, shop: Store) -> None:
    journal, store = journal_of(kind, request, tmp_path), shop
    folder = tmp_path / "pools"
    folder.mkdir()
    # Headers the import does not know: every chunk is refused ("Row 1 of goods has no sku.").
    (folder / "goods.csv").write_text("n,article,title\n" + "".join(f"{i},A{i},T{i}\n" for i in range(40)))
    pool = one_call_pool(folder, "tolerate: {failed: 20%}\nstop_on_error: false\n", (
        "  - name: import\n"
        "    unit: MELBIS_AGENT_IMPORT_GOODS\n"
        "    command: CmdAdd\n"
        "    for_each: {file: goods.csv, chunk: 10, field: goods}\n"
        "    key: g-${row.n}\n"))
    # The dry run of the sample, and the check of the whole file, count by the run's rule.
    dry = json.loads(pooler("run", str(pool), "--dry-run", "--sample", "5", "--json").stdout)
    assert dry["tolerate"] == [
        {"kind": "failed", "step": None, "tolerate": "20%", "allowed": 0, "planned": 1}]
    checked = pooler("check", str(pool), "--data")
    assert checked.stdout.splitlines()[0] == (
        f"{pool}: the pool goes on after up to 0 of its 4 calls failed (tolerate failed: 20%)")
    code, answer, err = run(tmp_path, store, journal, pool, "--sample", "5")
    assert code == 1, err
    assert answer["tolerated"]["budgets"] == [
        {"kind": "failed", "step": None, "tolerate": "20%", "calls": 1, "allowed": 0, "planned": 1,
         "within": False}]
    assert "1 of 1 calls failed, over the pool's budget of 0 (tolerate failed: 20%)" in err


@settings(max_examples=400, deadline=None)
@given(planned=st.integers(min_value=1, max_value=10**7),
       percent=st.decimals(min_value=0, max_value=100, places=3, allow_nan=False).filter(lambda p: p < 100),
       failed_step=st.booleans())
def test_a_percent_budget_under_100_never_tolerates_every_call_of_a_step_failing(
        planned: int, percent: Any, failed_step: bool) -> None:
    text = f"{percent.normalize():f}%"
    written = allowance(text)
    assert written is not None, text
    own = Tolerate({"failed": written})
    # The step's own budget, or the pool's over that one step: either is judged by one rule.
    budgets = budgets_of(None, [(1, own)]) if failed_step else budgets_of(own, [(1, None)])
    counts = {1: Counts(planned=planned, failed=planned)}
    assert budgets.tolerated(counts)["within"] is False
    judge = budgets.judge_for(1, "failed")
    assert judge is not None
    assert judge(counts) is not None
    # And the plan tells the same number of calls as the run judges by.
    assert written.of(planned) < planned


def test_a_percent_budget_rounds_down_to_calls_and_100_percent_is_every_call() -> None:
    def of(text: str, planned: int) -> int:
        written = allowance(text)
        assert written is not None
        return written.of(planned)

    assert [of("2%", 1203), of("1%", 1), of("20%", 5), of("2.5%", 1), of("10%", 100), of("0.5%", 399)] == [
        24, 0, 1, 0, 10, 1]
    assert [of("100%", 1), of("100%", 1203), of("100.0%", 7)] == [1, 1203, 7]


def test_a_run_within_its_budget_with_nothing_failed_does_not_tell_a_redrive(
        tmp_path: Path, shop: Store) -> None:
    pool = goods_pool(tmp_path / "pools", None, "tolerate: {failed: 10%}\n")
    code, answer, err = run(tmp_path, shop, str(tmp_path / "j.db"), pool)
    assert code == 0, err
    assert answer["tolerated"]["within"] is True
    summary = err.splitlines()[-1]
    assert re.fullmatch(r"\S+ pool completed: 100 calls: 100 succeeded, 0 failed, 0 skipped, 0 in doubt, "
                        r"0 not run in \d+ ms", summary), summary


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=10**5), min_size=2, max_size=6),
       percent=st.decimals(min_value=0, max_value=100, places=2, allow_nan=False).filter(lambda p: p < 100),
       data=st.data())
def test_a_pools_percent_budget_never_tolerates_every_call_of_one_of_its_steps_failing(
        sizes: list[int], percent: Any, data: Any) -> None:
    written = allowance(f"{percent.normalize():f}%")
    assert written is not None
    failing = data.draw(st.integers(min_value=1, max_value=len(sizes)))
    counts = {n: Counts(planned=size, failed=size if n == failing else 0) for n, size in enumerate(sizes, 1)}
    budgets = budgets_of(Tolerate({"failed": written}), [(n, None) for n in counts])
    assert budgets.tolerated(counts)["within"] is False
    judge = budgets.judge_for(failing, "failed")
    assert judge is not None
    assert judge(counts) is not None


def test_a_step_of_which_every_call_failed_is_over_the_pools_percent_budget(
        tmp_path: Path, shop: Store) -> None:
    pool = goods_pool(tmp_path / "pools", None, "tolerate: {failed: 10%}\nstop_on_error: false\n",
                      step="  - {name: bad, unit: MELBIS_AGENT_TEST, command: CmdFail}\n")
    code, answer, err = run(tmp_path, shop, str(tmp_path / "j.db"), pool)
    assert code == 1, err
    assert adds(shop) == ROWS
    assert answer["tolerated"]["budgets"] == [
        {"kind": "failed", "step": None, "tolerate": "10%", "calls": 1, "allowed": 10, "planned": 101,
         "within": False, "every_call_of_step": 2}]
    assert ("1 of 101 calls failed, over the pool's budget of 10 (tolerate failed: 10%): every call of "
            "step 2 failed") in err
