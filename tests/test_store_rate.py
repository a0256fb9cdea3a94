"""A store's rate limit (``rate:`` of a named store in stores.yaml, ``--store-rate``): one bucket
for every task and every pooler process that calls the store, each task with a fair share of it.
Read from the times the reference store records of what it carried out, as test_rate_limits.py
reads them: calls counted in windows, never wall-clock limits."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, environment, pooler, start_store
from sharedkit import finish, journal_of, start_runner, token_file
from test_rate_limits import busiest_second, echo_pool, times

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


def shop_config(folder: Path, store: Store, rate: str) -> Path:
    """A config file naming the store ``shop`` with the ``rate`` given (YAML flow text)."""
    folder.mkdir(parents=True, exist_ok=True)
    token = token_file(folder / "secret", store)
    config = folder / "stores.yaml"
    config.write_text(f"stores:\n  shop:\n    url: {store.url}\n    token_file: {token}\n    rate: {rate}\n")
    return config


def pool_of(folder: Path, who: str, rows: int) -> Path:
    """A parallel pool of ``rows`` echoes whose params say which pool sent them."""
    return echo_pool(folder / who, rows, "", params=f"{{n: '${{row.n}}', who: {who}}}")


def overlap(a: list[float], b: list[float]) -> tuple[int, int]:
    """The calls of each at the store while both were calling it."""
    start, end = max(a[0], b[0]), min(a[-1], b[-1])
    return sum(1 for t in a if start <= t <= end), sum(1 for t in b if start <= t <= end)


@pytest.mark.process
@pytest.mark.parametrize("kind", JOURNALS)
def test_two_runs_of_different_pools_hold_a_named_stores_rate_together_each_with_a_fair_share(
        kind: str, tmp_path: Path, request: Any) -> None:
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    config = shop_config(tmp_path / "config", store, "{per_second: 20}")
    # Each run its own pool, task and (on SQLite) journal file: the store's bucket is the host's.
    journals = {who: journal_of(kind, request, tmp_path, f"{who}.sqlite") for who in ("a", "b")}
    runners = {who: start_runner(pool_of(tmp_path, who, 100), store, journals[who], f"task-{who}",
                                 tmp_path / f"out-{who}", "--store", "shop", "--config", str(config))
               for who in ("a", "b")}
    ends = {who: finish(proc) for who, proc in runners.items()}
    assert [code for code, _, _ in ends.values()] == [0, 0], [err for _, _, err in ends.values()]
    a, b = times(store, who="a"), times(store, who="b")
    assert (len(a), len(b)) == (100, 100)
    # Together, at most the store's 20 a second (and 25 where the clock's second meets a slot's).
    assert busiest_second(sorted(a + b)) <= 25
    # While both called the store, each had at least 40 % of its calls.
    both = overlap(a, b)
    assert min(both) >= 0.4 * sum(both), both
    # Each run tells the share it had, in pooler runs and in its report.
    for who in ("a", "b"):
        listed = pooler("runs", "--journal", journals[who])
        line = next(line for line in listed.stdout.splitlines() if line.startswith(f"task-{who} "))
        found = re.search(r"  store rate 20/s, share (\d+) %  ", line)
        assert found is not None, line
        assert 40 <= int(found[1]) <= 100, line
        tasks = json.loads(pooler("runs", "--journal", journals[who], "--json").stdout)["tasks"]
        told = next(t["store_rate"] for t in tasks if t["id"] == f"task-{who}")
        assert (told["per_second"], told["sharing"]) == (20, 2), told
        report = tmp_path / f"{who}.html"
        shown = pooler("show", f"task-{who}", "--journal", journals[who], "--html", str(report))
        assert shown.returncode == 0
        assert f"store rate 20/s, share {found[1]} %" in report.read_text()


def test_a_task_alone_takes_the_whole_store_rate_and_its_own_rate_holds_inside_it(
        tmp_path: Path, request: Any) -> None:
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    token = token_file(tmp_path / "secret", store)
    journal = str(tmp_path / "j.sqlite")
    pool = echo_pool(tmp_path / "own", 30, "rate: {per_second: 5}\n")
    slow = pooler("run", str(pool), "--store", store.url, "--token-file", str(token), "--journal", journal,
                  "--task", "own", "--out", str(tmp_path / "out"), "--store-rate", "50")
    assert slow.returncode == 0, slow.stderr
    # The task's own 5 a second, inside the store's 50: and all of the store's calls are its own.
    assert busiest_second(times(store)) <= 6
    assert re.search(r"  store rate 50/s, share 100 %  ", pooler("runs", "--journal", journal).stdout)
    quick = echo_pool(tmp_path / "quick", 80, "")
    fast = pooler("run", str(quick), "--store", store.url, "--token-file", str(token), "--journal", journal,
                  "--task", "quick", "--out", str(tmp_path / "out2"), "--store-rate", "20")
    assert fast.returncode == 0, fast.stderr
    found = times(store)[30:]
    assert len(found) == 80
    # The other task ended long ago: its share is free, and this one has the store's 20 a second
    # (half of them would be 10), and no more.
    assert busiest_second(found) <= 25
    assert (len(found) - 1) / (found[-1] - found[0]) > 15


BAD_RATES = [
    ("rate: 20", 5, 11, "rate of the store 'shop' must be a mapping like {per_second: 20, burst: 5}",
     "stores.shop.rate"),
    ("rate: {burst: 5}", 5, 11,
     "rate of the store 'shop' needs per_second: the calls a second every task may start there together",
     "stores.shop.rate"),
    ("rate: {per_second: fast}", 5, 24,
     "rate.per_second of the store 'shop' must be a number of calls a second from 0.01 to 10000, not 'fast'",
     "stores.shop.rate.per_second"),
    ("rate: {per_second: 0}", 5, 24,
     "rate.per_second of the store 'shop' must be a number of calls a second from 0.01 to 10000, not '0'",
     "stores.shop.rate.per_second"),
    ("rate: {per_second: 20, burst: 2.5}", 5, 35,
     "rate.burst of the store 'shop' must be a whole number of calls from 1 to 1000, not '2.5'",
     "stores.shop.rate.burst"),
    ("rate: {per_second: 20, brust: 5}", 5, 28,
     "unknown key 'brust' in the rate of the store 'shop' - did you mean burst?", None),
]


@pytest.mark.parametrize(("rate", "line", "column", "message", "field"), BAD_RATES)
def test_a_bad_store_rate_is_refused_at_its_line_and_column_and_nothing_is_sent(
        rate: str, line: int, column: int, message: str, field: str | None, tmp_path: Path,
        store: Store) -> None:
    config = tmp_path / "stores.yaml"
    config.write_text(f"stores:\n  shop:\n    url: {store.url}\n    token_file: t\n    {rate}\n")
    pool = echo_pool(tmp_path / "p", 3, "")
    proc = pooler("run", str(pool), "--store", "shop", "--config", str(config), "--journal",
                  str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "out"), "--json")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == f"{config}:{line}:{column}: {message}"
    problem = json.loads(proc.stdout)["problems"][0]
    assert (problem["file"], problem["line"], problem["column"], problem["path"]) == (
        str(config), line, column, field)
    assert store.ops() == []


@pytest.mark.postgres
@pytest.mark.process
def test_a_task_with_two_runners_gets_no_more_of_the_stores_rate_than_a_task_with_one(
        tmp_path: Path, request: Any) -> None:
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    config = shop_config(tmp_path / "config", store, "{per_second: 20, burst: 2}")
    journal = journal_of("postgres", request, tmp_path)
    shop = ("--store", "shop", "--config", str(config))
    wide = pool_of(tmp_path, "a", 160)
    runners = [start_runner(wide, store, journal, "task-a", tmp_path / f"out-a{i}", *shop) for i in range(2)]
    runners.append(start_runner(pool_of(tmp_path, "b", 80), store, journal, "task-b", tmp_path / "out-b",
                                *shop))
    ends = [finish(proc) for proc in runners]
    assert [code for code, _, _ in ends] == [0, 0, 0], [err for _, _, err in ends]
    a, b = times(store, who="a"), times(store, who="b")
    assert (len(a), len(b)) == (160, 80)
    assert busiest_second(sorted(a + b)) <= 25
    # A bucket alone would serve the calls as they come, two of task-a's runners for one of task-b:
    # the shares are the tasks', whatever runners each has.
    both = overlap(a, b)
    assert min(both) >= 0.4 * sum(both), both


@pytest.mark.process
def test_an_agent_and_a_cron_pool_calling_one_store_share_its_rate(tmp_path: Path, request: Any) -> None:
    import anyio  # noqa: PLC0415
    from mcpkit import answer_of, connect  # noqa: PLC0415

    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    out = tmp_path / "agent"
    out.mkdir()
    pool_of(out, "agent", 160)
    answers: list[dict[str, Any]] = []

    async def agent() -> Any:
        # The server keeps its journal in its folder, and meets the cron run in the host's bucket.
        async with connect(store, out, "--store-rate", "20", env=environment()) as session:
            answers.append(answer_of(await session.call_tool("pool_run", {"file": "agent/pool.yaml"})))

    async def both() -> Any:
        async with anyio.create_task_group() as group:
            group.start_soon(agent)
            # The cron run starts once the agent calls the store.
            while not await anyio.to_thread.run_sync(lambda: times(store, who="agent")):
                await anyio.sleep(0.05)
            return start_runner(pool_of(tmp_path, "cron", 80), store, str(tmp_path / "cron.sqlite"), "night",
                                tmp_path / "out-cron", "--store-rate", "20")

    cron = anyio.run(both)
    code, _, err = finish(cron)
    assert (answers[0]["status"], code) == ("completed", 0), err
    a, b = times(store, who="agent"), times(store, who="cron")
    assert (len(a), len(b)) == (160, 80)
    assert busiest_second(sorted(a + b)) <= 25
    both = overlap(a, b)
    assert min(both) >= 0.4 * sum(both), both
    listed = pooler("runs", "--journal", str(out / ".pooler" / "journal.sqlite")).stdout
    assert re.search(r"  store rate 20/s, share \d+ %  ", listed), listed


def test_a_dry_run_tells_the_stores_rate_and_store_rate_on_the_command_line_overrides_it(
        tmp_path: Path, store: Store) -> None:
    config = shop_config(tmp_path / "config", store, "{per_second: 20, burst: 5}")
    pool = echo_pool(tmp_path / "p", 3, "")
    dry = pooler("run", str(pool), "--store", "shop", "--config", str(config), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[2] == (
        "store rate: the store starts at most 20 calls a second, 5 at once, for every task that calls it "
        "together, each with a fair share")
    faster = pooler("run", str(pool), "--store", "shop", "--config", str(config), "--dry-run",
                    "--store-rate", "30")
    assert faster.stderr == (f"pooler: --store-rate 30 overrides rate.per_second: 20 of the store 'shop' in "
                             f"{config}\n")
    assert "store rate: the store starts at most 30 calls a second, 5 at once," in faster.stdout
    plain = pooler("run", str(pool), "--store", store.url, "--dry-run")
    assert "store rate" not in plain.stdout
    assert store.ops() == []


@pytest.mark.process
def test_a_task_that_stops_calling_frees_its_share_for_the_others(tmp_path: Path, request: Any) -> None:
    store = start_store(tmp_path)
    request.addfinalizer(store.stop)
    config = shop_config(tmp_path / "config", store, "{per_second: 20}")
    shop = ("--store", "shop", "--config", str(config))
    short = start_runner(pool_of(tmp_path, "short", 30), store, str(tmp_path / "short.sqlite"), "short",
                         tmp_path / "out-short", *shop)
    long = start_runner(pool_of(tmp_path, "long", 150), store, str(tmp_path / "long.sqlite"), "long",
                        tmp_path / "out-long", *shop)
    ends = [finish(short), finish(long)]
    assert [code for code, _, _ in ends] == [0, 0], [err for _, _, err in ends]
    done, alone = times(store, who="short"), times(store, who="long")
    # Once the short task has not called for two seconds, the long one has the whole rate: more
    # than the half it had while they shared.
    later = [t for t in alone if t > done[-1] + 2.0]
    assert len(later) > 20, (len(later), len(alone))
    assert (len(later) - 1) / (later[-1] - later[0]) > 15
    assert busiest_second(sorted(done + alone)) <= 25
