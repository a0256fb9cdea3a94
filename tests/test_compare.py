"""``compare:`` on a step: the store's own rows read first, and only the new and changed rows of a
feed sent.  A 2,000-row feed against a store that holds 1,000 of its goods, 20 of them at another
price: the run sends the 1,000 new and the 20 changed rows, in chunks, through
MELBIS_AGENT_IMPORT_GOODS, and counts 980 unchanged; ``--dry-run`` tells the same counts.  On
either journal.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sqlite3
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, pooler
from sharedkit import journal_of, run_here, token_file, write_pool

JOURNALS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]
CHUNK = 100


def sku(n: int) -> str:
    return f"SKU-{n:05d}"


def feed_pool(folder: Path, rows: int = 2000, *, decimal: bool = False) -> Path:
    """A feed of ``rows`` goods, prices 10.50 and up (written "10,50" with ``decimal``)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["sku;name;price" if decimal else "sku,name,price"]
    for n in range(rows):
        price = f"{10 + n % 7}.50"
        if decimal:
            lines.append(f"{sku(n)};Goods {n};{price.replace('.', ',')}")
        else:
            lines.append(f"{sku(n)},Goods {n},{price}")
    (folder / "feed.csv").write_text("\n".join(lines) + "\n")
    spelled = ", delimiter: ';', decimal: ','" if decimal else ""
    # With a decimal comma each row is shaped, so that its price goes as the number it is.
    shape = ["    chunk_row: {sku: '${row.sku}', name: '${row.name}', price: '${row.price}'}"]
    shape = shape if decimal else []
    return write_pool(folder, [
        "pool:",
        "  - name: goods",
        "    unit: MELBIS_AGENT_IMPORT_GOODS",
        "    command: CmdAdd",
        f"    for_each: {{file: feed.csv, chunk: {CHUNK}, field: goods{spelled}}}",
        *shape,
        "    key: feed-${row.sku}",
        "    compare: {unit: MELBIS_AGENT_STORE, command: CmdList, table: goods,",
        "              match: {sku: sku}, fields: {name: name, price: price}}",
    ])


def stock(store: Store, held: int = 1000, repriced: int = 20) -> None:
    """The store holds the first ``held`` goods of the feed, the first ``repriced`` at another price."""
    rows = [{"sku": sku(n), "name": f"Goods {n}", "price": 99.0 if n < repriced else 10 + n % 7 + 0.5}
            for n in range(held)]
    answer = store.call("MELBIS_AGENT_IMPORT_GOODS", "CmdAdd", {"goods": rows}).json()
    assert answer["data"]["result"] is True, answer


def imports(store: Store) -> list[list[dict[str, Any]]]:
    """The goods of every import the store carried out after the stock, in order."""
    ops = [op for op in store.ops() if op["unit"] == "MELBIS_AGENT_IMPORT_GOODS"]
    return [json.loads(op["params"])["goods"] if isinstance(op["params"], str) else op["params"]["goods"]
            for op in ops[1:]]


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_run_sends_only_the_new_and_changed_rows_in_chunks_and_counts_the_unchanged(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    stock(store)
    where = journal_of(journal, request, tmp_path)
    pool = feed_pool(tmp_path)
    junit, metrics, report = tmp_path / "junit.xml", tmp_path / "metrics.prom", tmp_path / "report.html"
    code, answer, err = run_here(pool, store, where, "nightly", tmp_path / "out", "--junit", str(junit),
                                 "--metrics-file", str(metrics), "--report", str(report))
    assert code == 0, err
    sent = imports(store)
    skus = [row["sku"] for chunk in sent for row in chunk]
    assert skus == [sku(n) for n in range(20)] + [sku(n) for n in range(1000, 2000)]
    # Chunks are cut from the rows that are sent: 1,020 rows in 11 calls of up to 100.
    assert [len(chunk) for chunk in sent] == [CHUNK] * 10 + [20]
    assert answer["unchanged"] == 980
    entry = answer["steps"][0]
    assert entry["compare"] == {"new": 1000, "changed": 20, "unchanged": 980}
    assert (entry["rows"]["total"], entry["rows"]["completed"], entry["calls"]) == (1020, 1020, 11)
    assert entry["message"] == "1,020 rows in 11 calls: 1,020 completed; 980 unchanged, not sent"
    assert (answer["total"], answer["succeeded"]) == (11, 11)
    assert re.search(r"11 calls: 11 succeeded, 0 failed, 0 skipped, 0 in doubt, 0 not run in \d+ ms; "
                     "980 rows unchanged, not sent", err)
    assert '<property name="unchanged" value="980" />' in junit.read_text()
    # Labelled by pool and store (and by runner, on PostgreSQL).
    told = metrics.read_text()
    assert re.search(r'^pooler_rows_unchanged\{pool="pool\.yaml",store="[^"]+"[^}]*\} 980$', told, re.M)
    # The rows sent, not the span of their chunks, whichever journal the runner keeps.
    assert re.search(r'^pooler_rows_total\{[^}]*status="completed"\} 1020$', told, re.M)
    # A chunk names its first and last row in the file, and how many rows it holds.
    assert "rows 0-1079 (100 rows) completed" in err
    assert '<dd id="unchanged">980 rows the store holds as they are, not sent</dd>' in report.read_text()
    shown = pooler("show", "nightly", "--journal", where)
    assert "980 rows unchanged, not sent" in shown.stdout
    runs = pooler("runs", "--journal", where)
    assert "11 calls planned: 11 completed; 980 rows unchanged, not sent" in runs.stdout
    # The store holds the feed now: a second task finds every row unchanged and sends nothing.
    code, again, err = run_here(pool, store, where, "next-night", tmp_path / "out2")
    assert code == 0, err
    assert again["unchanged"] == 2000
    assert again["steps"][0]["compare"] == {"new": 0, "changed": 0, "unchanged": 2000}
    assert len(imports(store)) == 11


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_dry_run_tells_the_counts_the_run_would_send_and_sends_nothing(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    stock(store)
    where = journal_of(journal, request, tmp_path)
    pool = feed_pool(tmp_path)
    token = token_file(tmp_path / "secret", store)
    proc = pooler("run", str(pool), "--dry-run", "--json", "--store", store.url, "--token-file", str(token),
                  "--journal", where)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["steps"][0]["compare"] == {"new": 1000, "changed": 20, "unchanged": 980}
    assert plan["steps"][0]["calls"] == 11
    text = pooler("run", str(pool), "--dry-run", "--store", store.url, "--token-file", str(token),
                  "--journal", where)
    assert text.returncode == 0, text.stderr
    assert "compare: 1,000 new, 20 changed, 980 unchanged (not sent)" in text.stdout
    assert imports(store) == []


def test_a_price_written_with_a_decimal_comma_equals_the_number_the_store_holds(
        store: Store, tmp_path: Path) -> None:
    stock(store, held=50, repriced=5)
    pool = feed_pool(tmp_path, rows=60, decimal=True)
    code, answer, err = run_here(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
    assert code == 0, err
    # "10,50" is 10.5, as the store holds it: only the 10 new and the 5 repriced are sent.
    assert answer["steps"][0]["compare"] == {"new": 10, "changed": 5, "unchanged": 45}
    sent = [row["sku"] for chunk in imports(store) for row in chunk]
    assert sent == [sku(n) for n in range(5)] + [sku(n) for n in range(50, 60)]
    assert imports(store)[0][0]["price"] == 10.5


def test_a_compare_read_that_fails_stops_the_run_before_anything_is_sent(
        store: Store, tmp_path: Path) -> None:
    stock(store, held=10, repriced=0)
    pool = feed_pool(tmp_path, rows=20)
    pool.write_text(pool.read_text().replace("table: goods", "table: good"))
    code, _, err = run_here(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
    assert code == 1
    assert ("the compare of step 1 (MELBIS_AGENT_STORE.CmdList) answered no table [good] (its tables: goods) "
            "- nothing of the step was sent; name the table the read answers in compare.table.") in err
    assert imports(store) == []


def test_check_points_at_a_compare_field_the_feed_does_not_have(tmp_path: Path) -> None:
    pool = feed_pool(tmp_path, rows=3)
    pool.write_text(pool.read_text().replace("price: price}", "prise: price}"))
    proc = pooler("check", str(pool))
    assert proc.returncode == 2
    assert (f"{pool}:8:55: compare.fields of step 1: {tmp_path / 'feed.csv'} has no field [prise] - "
            "did you mean price?") in proc.stdout + proc.stderr


def test_check_against_the_store_points_at_a_compare_field_the_rows_do_not_take(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    pool = feed_pool(folder, rows=3)
    (folder / "feed.csv").write_text("sku,name,price,colour\nA,B,1,red\n")
    pool.write_text(pool.read_text().replace("price: price}", "price: price, colour: colour}"))
    tools = Path(__file__).resolve().parents[1] / "pooler" / "store" / "tools"
    proc = pooler("check", str(pool), "--against", str(tools))
    assert proc.returncode == 2
    assert (f"{pool}:8:69: compare.fields of step 1: [colour] is not a field of the rows "
            "MELBIS_AGENT_IMPORT_GOODS.CmdAdd takes. Its rows: ref, sku, name, price.") in proc.stdout


def test_a_compare_that_reads_once_a_row_sends_the_same_rows_and_holds_its_reads_to_the_steps_rate(
        store: Store, tmp_path: Path) -> None:
    stock(store, held=8, repriced=2)
    pool = feed_pool(tmp_path, rows=10)
    pool.write_text(pool.read_text().replace(
        "    compare: {unit: MELBIS_AGENT_STORE, command: CmdList, table: goods,",
        "    rate: {per_second: 20}\n"
        "    compare: {unit: MELBIS_AGENT_STORE, command: CmdGet, params: {sku: '${row.sku}'}, table: row,"))
    code, answer, err = run_here(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
    assert code == 0, err
    assert answer["steps"][0]["compare"] == {"new": 2, "changed": 2, "unchanged": 6}
    sent = [row["sku"] for chunk in imports(store) for row in chunk]
    assert sent == [sku(0), sku(1), sku(8), sku(9)]
    reads = [op for op in store.ops() if op["command"] == "CmdGet"]
    assert [json.loads(op["params"])["sku"] if isinstance(op["params"], str) else op["params"]["sku"]
            for op in reads] == [sku(n) for n in range(10)]
    # 10 reads at 20 a second: each starts an interval (50 ms) after the one before, however busy
    # the machine (it can only make them later).  The store stamps a read as it carries it out, and
    # a busy machine may stamp one late, which shortens the next gap: the typical gap is the one
    # the rate sets, where reads sent at once would be milliseconds apart.
    stamps = [datetime.fromisoformat(op["time"]).timestamp() for op in reads]
    assert statistics.median(b - a for a, b in itertools.pairwise(stamps)) >= 1 / 20 - 0.01


@pytest.mark.parametrize(("a", "b", "equal"), [
    ("10.50", 10.5, True), ("10.5", "10.50", True), (10, "10.0", True), ("1.05e1", 10.5, True),
    ("007", 7, False), ("1 234", 1234, False), (True, "1", True), (False, 0, True),
    (None, None, True), (None, "", False), ("Tea", "tea", False), ({"a": 1}, {"a": 1}, True),
    ("1e2", 100, True), ("-0", 0.0, True), ("\u0663", 3, False),
    # A long code of digits stays exact: two of them never round into one.
    ("12345678901234567890", "12345678901234567891", False),
])
def test_values_compare_as_the_store_reads_them(a: Any, b: Any, equal: bool) -> None:
    from pooler.pool.comparing import canon  # noqa: PLC0415

    assert (canon(a) == canon(b)) is equal


def test_some_rows_alone_are_classified_against_the_store_as_it_is_now(store: Store, tmp_path: Path) -> None:
    """What a plan's apply does before it sends a row: the same compare, for a batch of rows."""
    from pooler.client.http import ToolRunClient  # noqa: PLC0415
    from pooler.journal.opening import open_journal  # noqa: PLC0415
    from pooler.pool.loader import load_pool  # noqa: PLC0415
    from pooler.run.compare import classify  # noqa: PLC0415

    stock(store, held=3, repriced=1)
    step = load_pool(feed_pool(tmp_path, rows=5)).steps[0]
    rows = [(7, {"sku": sku(0), "name": "Goods 0", "price": "10.50"}),
            (9, {"sku": sku(2), "name": "Goods 2", "price": "12.50"}),
            (12, {"sku": sku(4), "name": "Goods 4", "price": "14.50"})]
    with ToolRunClient(store.url, store.token) as client, open_journal(str(tmp_path / "j.db")) as journal:
        found = classify(journal.compare_rows(), client, step, {}, rows, scope="apply")
    assert [found.class_of(i) for i in (7, 9, 12)] == ["changed", "unchanged", "new"]
    assert found.doc() == {"new": 1, "changed": 1, "unchanged": 1}
    # The journal keeps nothing of it once it is classified.
    with sqlite3.connect(tmp_path / "j.db") as db:
        assert db.execute("SELECT count(*) FROM compare_rows").fetchone() == (0,)


def test_a_sample_sends_the_changed_rows_among_its_rows_and_the_full_run_the_rest(
        store: Store, tmp_path: Path) -> None:
    stock(store)
    pool = feed_pool(tmp_path)
    journal = str(tmp_path / "j.db")
    code, _, err = run_here(pool, store, journal, "t", tmp_path / "out", "--sample", "500")
    assert code == 0, err
    assert [len(chunk) for chunk in imports(store)] == [20]
    code, answer, err = run_here(pool, store, journal, "t", tmp_path / "out")
    assert code == 0, err
    skus = [row["sku"] for chunk in imports(store) for row in chunk]
    assert skus == [sku(n) for n in range(20)] + [sku(n) for n in range(1000, 2000)]
    assert answer["steps"][0]["compare"] == {"new": 1000, "changed": 20, "unchanged": 980}
    assert (answer["succeeded"], answer["skipped"]) == (10, 1)


def test_replan_of_a_compared_step_is_refused_before_anything_is_sent(store: Store, tmp_path: Path) -> None:
    stock(store, held=10, repriced=0)
    pool = feed_pool(tmp_path, rows=20)
    journal = str(tmp_path / "j.db")
    code, _, err = run_here(pool, store, journal, "t", tmp_path / "out", "--sample", "5")
    assert code == 0, err
    with (tmp_path / "feed.csv").open("a") as feed:
        feed.write("SKU-99999,Goods late,1.50\n")
    code, _, err = run_here(pool, store, journal, "t", tmp_path / "out", "--replan")
    assert code == 2
    assert ("--replan cannot plan step 1 of task t again: its rows are compared with the store's (compare:), "
            "as they were when the task was planned - start a new task, which reads the store again and "
            "sends only what changed.") in err
    assert imports(store) == []


def test_pool_run_over_mcp_tells_the_counts_in_a_dry_run_and_sends_only_what_changed(
        store: Store, tmp_path: Path) -> None:
    import anyio  # noqa: PLC0415
    from mcpkit import answer_of, connect_in_process  # noqa: PLC0415

    stock(store, held=150, repriced=3)
    out = tmp_path / "out"
    feed_pool(out / "pools", rows=200)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect_in_process(store, out) as session:
            file = "pools/pool.yaml"
            plan = answer_of(await session.call_tool("pool_run", {"file": file, "dry_run": True}))
            ran = answer_of(await session.call_tool("pool_run", {"file": file}))
            return plan, ran

    plan, ran = anyio.run(scenario)
    assert plan["steps"][0]["compare"] == {"new": 50, "changed": 3, "unchanged": 147}
    assert (plan["steps"][0]["calls"], plan["calls"]) == (1, 1)
    assert ran["unchanged"] == 147
    assert [len(chunk) for chunk in imports(store)] == [53]


def test_a_compare_column_the_table_lacks_stops_the_run_before_anything_is_sent(
        store: Store, tmp_path: Path) -> None:
    stock(store, held=10, repriced=0)
    pool = feed_pool(tmp_path, rows=20)
    pool.write_text(pool.read_text().replace("price: price}", "price: cost}"))
    code, _, err = run_here(pool, store, str(tmp_path / "j.db"), "t", tmp_path / "out")
    assert code == 1
    assert ("the compare of step 1 (MELBIS_AGENT_STORE.CmdList): its table has no column [cost] (its "
            "columns: id, sku, name, price, curr_id) - nothing of the step was sent; name the table's "
            "columns in compare.match and compare.fields.") in err
    assert imports(store) == []


def test_check_against_the_store_tells_the_counts_and_sends_nothing(store: Store, tmp_path: Path) -> None:
    stock(store)
    pool = feed_pool(tmp_path)
    token = token_file(tmp_path / "secret", store)
    proc = pooler("check", str(pool), "--against", store.url, "--token-file", str(token))
    assert proc.returncode == 0, proc.stderr
    assert (f"{pool}: step 1 goods: compare: 1,000 new, 20 changed, 980 unchanged (not sent)\n"
            f"1 file valid against {store.url}\n") in proc.stdout + proc.stderr
    assert imports(store) == []


def plan_and_apply(store: Store, tmp_path: Path, journal: str, *extra: str) -> Any:
    token = token_file(tmp_path / "secret", store)
    return pooler("apply", str(tmp_path / "plan.jsonl"), "--store", store.url, "--token-file", str(token),
                  "--journal", journal, "--out", str(tmp_path / "out"), "--json", *extra)


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_plan_holds_only_the_calls_of_the_new_and_changed_rows_and_apply_sends_exactly_them(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    stock(store)
    where = journal_of(journal, request, tmp_path)
    pool = feed_pool(tmp_path)
    token = token_file(tmp_path / "secret", store)
    planned = pooler("plan", str(pool), "-o", str(tmp_path / "plan.jsonl"), "--store", store.url,
                     "--token-file", str(token), "--json")
    assert planned.returncode == 0, planned.stderr
    head = json.loads(planned.stdout)
    assert head["calls"] == 11
    assert head["steps"][0]["compare"] == {"new": 1000, "changed": 20, "unchanged": 980}
    calls = [json.loads(line) for line in (tmp_path / "plan.jsonl").read_text().splitlines()[1:]]
    assert [c["compare"] for c in calls] == ["changed"] + ["new"] * 10
    assert calls[0]["rows"] == [0, 1079]
    assert imports(store) == []
    applied = plan_and_apply(store, tmp_path, where)
    assert applied.returncode == 0, applied.stderr
    answer = json.loads(applied.stdout)
    assert (answer["succeeded"], answer["unchanged"]) == (11, 980)
    skus = [row["sku"] for chunk in imports(store) for row in chunk]
    assert skus == [sku(n) for n in range(20)] + [sku(n) for n in range(1000, 2000)]


def plan_then_move(store: Store, tmp_path: Path) -> str:
    """A plan of a 12-row feed, one call a row, against a store holding its first 10 goods, rows 0
    and 1 at another price (changed), 10 and 11 new; then another writer reprices row 1, adds row
    10, and reprices row 5, which the plan left unchanged.  The plan's task."""
    stock(store, held=10, repriced=2)
    pool = feed_pool(tmp_path, rows=12)
    pool.write_text(pool.read_text().replace("chunk: 100, field: goods", "chunk: 1, field: goods"))
    token = token_file(tmp_path / "secret", store)
    planned = pooler("plan", str(pool), "-o", str(tmp_path / "plan.jsonl"), "--store", store.url,
                     "--token-file", str(token), "--json")
    assert planned.returncode == 0, planned.stderr
    moved = store.call("MELBIS_AGENT_IMPORT_GOODS", "CmdAdd", {"goods": [
        {"sku": sku(1), "name": "Goods 1", "price": 12}, {"sku": sku(10), "name": "Goods 10", "price": 13.5},
        {"sku": sku(5), "name": "Goods 5", "price": 1.0}]}).json()
    assert moved["data"]["result"] is True
    return str(json.loads(planned.stdout)["task"])


ROW1 = "row 1 (sku SKU-00001): price 99.0 in the plan, 12.0 in the store now"
ROW10 = "row 10 (sku SKU-00010): not in the store in the plan, in the store now (name Goods 10, price 13.5)"


@pytest.mark.parametrize("journal", JOURNALS)
def test_a_row_moved_in_the_store_since_the_plan_is_a_conflict_not_sent_and_the_others_are_sent_once(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    task = plan_then_move(store, tmp_path)
    before = len(imports(store))
    applied = plan_and_apply(store, tmp_path, where, "--report", str(tmp_path / "report.html"))
    assert applied.returncode == 1, applied.stderr
    assert (f"pooler: 2 planned calls not sent: their rows moved in the store since the plan (a conflict: "
            "plan again, or apply with --refresh to send them as the store is now):\n"
            f"  step 1 call 2 row 1, key feed-SKU-00001#1-1: {ROW1}\n"
            f"  step 1 call 3 row 10, key feed-SKU-00010#10-10: {ROW10}\n") in applied.stderr
    answer = json.loads(applied.stdout)
    assert answer["conflicts"] == [
        {"step": 1, "call": 2, "rows": [1, 1], "key": "feed-SKU-00001#1-1", "moved": [ROW1]},
        {"step": 1, "call": 3, "rows": [10, 10], "key": "feed-SKU-00010#10-10", "moved": [ROW10]}]
    report = (tmp_path / "report.html").read_text()
    assert ROW1 in report
    assert ROW10 in report
    # The rows that did not move are sent, once; the moved ones are not; row 5 is no call of the plan.
    assert [row["sku"] for chunk in imports(store)[before:] for row in chunk] == [sku(0), sku(11)]
    # Each ends not run, with what moved; the task tells them whoever asks.
    assert (f"rows 1-1 not_run key feed-SKU-00001#1-1: Not sent: a conflict - {ROW1}; plan again (pooler "
            "plan), or apply with --refresh to send it as the store is now.\n") in applied.stderr
    assert answer["not_run"] == 2
    assert answer["steps"][0]["rows"]["not_run"] == 2
    recorded = json.loads(pooler("show", task, "--journal", where, "--json").stdout)
    assert recorded["conflicts"] == answer["conflicts"]
    told = "4 calls: 2 succeeded, 0 failed, 0 skipped, 0 in doubt, 2 not run in "
    shown = pooler("show", task, "--journal", where)
    assert told in shown.stdout
    assert ("; 8 rows unchanged, not sent; 2 planned calls not run as a conflict (rows moved in the store "
            "since the plan: plan again)\n") in shown.stdout
    # Its summary line says the same, and no resume: no run of the task sends a conflict.
    assert ("; 8 rows unchanged, not sent; 2 planned calls not run as a conflict (rows moved in the store "
            "since the plan: plan again)\n") in applied.stderr
    assert "2 not run" in pooler("runs", "--journal", where).stdout
    # A redrive does not send them: the plan they were reviewed in no longer holds.
    redriven = pooler("redrive", task, "--journal", where, "--store", store.url, "--token-file",
                      str(tmp_path / "secret"), "--out", str(tmp_path / "out"))
    assert redriven.returncode == 0, redriven.stderr
    assert redriven.stdout == (
        f"task {task}: 2 completed: kept; 2 not run as a conflict of the plan: not sent (their rows moved in "
        "the store since the plan: plan again with pooler plan) - nothing to redrive, nothing sent\n")
    assert [row["sku"] for chunk in imports(store)[before:] for row in chunk] == [sku(0), sku(11)]


@pytest.mark.parametrize("journal", JOURNALS)
def test_refresh_sends_the_rows_as_the_store_is_now_instead_of_leaving_a_conflict(
        journal: str, store: Store, request: Any, tmp_path: Path) -> None:
    where = journal_of(journal, request, tmp_path)
    plan_then_move(store, tmp_path)
    before = len(imports(store))
    refreshed = plan_and_apply(store, tmp_path, where, "--refresh")
    assert refreshed.returncode == 0, refreshed.stderr
    assert "conflicts" not in json.loads(refreshed.stdout)
    # As the store is now: row 1 changed again (sent), row 10 now holds the feed's values (unchanged,
    # not sent), row 5 changed (sent).
    sent = [row["sku"] for chunk in imports(store)[before:] for row in chunk]
    assert sent == [sku(n) for n in (0, 1, 5, 11)]


def test_a_plan_whose_rows_are_all_unchanged_applies_with_nothing_sent(store: Store, tmp_path: Path) -> None:
    stock(store, held=10, repriced=0)
    pool = feed_pool(tmp_path, rows=10)
    token = token_file(tmp_path / "secret", store)
    planned = pooler("plan", str(pool), "-o", str(tmp_path / "plan.jsonl"), "--store", store.url,
                     "--token-file", str(token), "--json")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["calls"] == 0
    # Repriced after the plan: no call of the plan sends it, so the apply does not either.
    moved = store.call("MELBIS_AGENT_IMPORT_GOODS", "CmdAdd",
                       {"goods": [{"sku": sku(3), "name": "Goods 3", "price": 1.0}]}).json()
    assert moved["data"]["result"] is True
    applied = plan_and_apply(store, tmp_path, str(tmp_path / "j.db"))
    assert applied.returncode == 0, applied.stderr
    assert (json.loads(applied.stdout)["total"], json.loads(applied.stdout)["unchanged"]) == (0, 10)
    assert len(imports(store)) == 1


def test_a_chunk_holding_a_moved_row_is_the_conflict_with_a_compare_that_reads_once_a_row(
        store: Store, tmp_path: Path) -> None:
    stock(store, held=10, repriced=2)
    pool = feed_pool(tmp_path, rows=12)
    pool.write_text(pool.read_text().replace("chunk: 100, field: goods", "chunk: 2, field: goods").replace(
        "    compare: {unit: MELBIS_AGENT_STORE, command: CmdList, table: goods,",
        "    compare: {unit: MELBIS_AGENT_STORE, command: CmdGet, params: {sku: '${row.sku}'}, table: row,"))
    token = token_file(tmp_path / "secret", store)
    planned = pooler("plan", str(pool), "-o", str(tmp_path / "plan.jsonl"), "--store", store.url,
                     "--token-file", str(token))
    assert planned.returncode == 0, planned.stderr
    calls = [json.loads(line) for line in (tmp_path / "plan.jsonl").read_text().splitlines()[1:]]
    # Each call keeps what the store held of the rows it sends: the changed rows' columns, or null.
    assert [c["store"] for c in calls] == [
        [[0, {"name": "Goods 0", "price": 99.0}], [1, {"name": "Goods 1", "price": 99.0}]],
        [[10, None], [11, None]]]
    moved = store.call("MELBIS_AGENT_IMPORT_GOODS", "CmdAdd",
                       {"goods": [{"sku": sku(10), "name": "Goods 10", "price": 13.5}]}).json()
    assert moved["data"]["result"] is True
    before = len(imports(store))
    applied = plan_and_apply(store, tmp_path, str(tmp_path / "j.db"))
    assert applied.returncode == 1, applied.stderr
    assert json.loads(applied.stdout)["conflicts"] == [
        {"step": 1, "call": 2, "rows": [10, 11], "key": "feed-SKU-00010#10-11", "moved": [ROW10]}]
    # The chunk that holds the moved row is not sent, its row 11 with it; the other chunk is.
    assert [[row["sku"] for row in chunk] for chunk in imports(store)[before:]] == [[sku(0), sku(1)]]


def test_a_sampled_plan_applies_its_sample_and_a_full_run_of_its_task_sends_the_rest(
        store: Store, tmp_path: Path) -> None:
    stock(store)
    pool = feed_pool(tmp_path)
    token = token_file(tmp_path / "secret", store)
    planned = pooler("plan", str(pool), "-o", str(tmp_path / "plan.jsonl"), "--store", store.url,
                     "--token-file", str(token), "--sample", "500", "--json")
    assert planned.returncode == 0, planned.stderr
    journal = str(tmp_path / "j.db")
    applied = plan_and_apply(store, tmp_path, journal)
    assert applied.returncode == 0, applied.stderr
    assert [len(chunk) for chunk in imports(store)] == [20]
    code, answer, err = run_here(pool, store, journal, json.loads(planned.stdout)["task"], tmp_path / "out")
    assert code == 0, err
    skus = [row["sku"] for chunk in imports(store) for row in chunk]
    assert skus == [sku(n) for n in range(20)] + [sku(n) for n in range(1000, 2000)]
    assert answer["steps"][0]["compare"] == {"new": 1000, "changed": 20, "unchanged": 980}


def test_a_compared_plan_whose_calls_keep_no_store_values_is_refused_and_sends_nothing(
        store: Store, tmp_path: Path) -> None:
    stock(store, held=10, repriced=2)
    pool = feed_pool(tmp_path, rows=12)
    token = token_file(tmp_path / "secret", store)
    planned = pooler("plan", str(pool), "-o", str(tmp_path / "plan.jsonl"), "--store", store.url,
                     "--token-file", str(token))
    assert planned.returncode == 0, planned.stderr
    # As an earlier pooler wrote it: each call its class alone (its head's digest made to agree).
    lines = (tmp_path / "plan.jsonl").read_text().splitlines()
    calls = [json.dumps({k: v for k, v in json.loads(line).items() if k != "store"}) for line in lines[1:]]
    head = json.loads(lines[0])
    head["calls_sha256"] = hashlib.sha256("".join(c + "\n" for c in calls).encode()).hexdigest()
    (tmp_path / "plan.jsonl").write_text("\n".join([json.dumps(head), *calls]) + "\n")
    refused = plan_and_apply(store, tmp_path, str(tmp_path / "j.db"))
    assert refused.returncode == 2
    assert refused.stderr.endswith("pooler: step 1 of the plan keeps no store values with its calls (a plan "
                                   "written by an earlier pooler) - nothing was sent; plan again.\n")
    assert imports(store) == []


def test_a_conflict_names_its_first_five_moved_rows_and_counts_the_rest() -> None:
    from pooler.run.conflicts import conflict_message  # noqa: PLC0415

    moved = [f"row {n} (sku S{n}): price 1.0 in the plan, 2.0 in the store now" for n in range(7)]
    conflict = {"step": 1, "call": 1, "rows": [0, 6], "key": None, "moved": moved}
    assert conflict_message(conflict) == (  # type: ignore[arg-type]
        "Not sent: a conflict - " + "; ".join(moved[:5]) + "; and 2 more rows; plan again (pooler plan), or "
        "apply with --refresh to send it as the store is now.")


def test_a_tool_pool_plan_of_a_compare_step_is_refused_and_points_at_pool_run(
        store: Store, tmp_path: Path) -> None:
    import anyio  # noqa: PLC0415
    from mcpkit import answer_of, connect_in_process  # noqa: PLC0415

    out = tmp_path / "out"
    feed_pool(out, rows=20)
    step = {"name": "goods", "unit": "MELBIS_AGENT_IMPORT_GOODS", "command": "CmdAdd",
            "for_each": {"file": "feed.csv", "chunk": 10, "field": "goods"}, "key": "feed-${row.sku}",
            "compare": {"unit": "MELBIS_AGENT_STORE", "command": "CmdList", "table": "goods",
                        "match": {"sku": "sku"}, "fields": {"name": "name", "price": "price"}}}

    async def scenario() -> dict[str, Any]:
        async with connect_in_process(store, out) as session:
            return answer_of(await session.call_tool("tool_pool", {"plan": True, "pool": [step]}))

    refused = anyio.run(scenario)
    assert refused["plan_id"] is None
    assert refused["problems"] == [(
        "Step 1 runs over rows (for_each) - a tool_pool call runs one call per step, at most 200; list the "
        "calls as steps, or run the pool file with `pooler run`. A step with compare: goes in a pool file: "
        "pool_run with plan: true plans it, counting its rows new, changed and unchanged, and pool_run with "
        "its plan_id commits it.")]
    assert imports(store) == []
