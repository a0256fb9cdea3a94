"""Sending only what changed: a 1,000,000-row feed against a store that holds the same 1,000,000
goods, 1 % of them at another price, through one chunked MELBIS_AGENT_IMPORT_GOODS step with
``compare:`` (MELBIS_AGENT_STORE CmdList, matched by sku, compared by name and price).

The run reads the store's table once, matches both sides in its SQLite journal, and sends the
10,000 changed rows in chunks of 1,000; beside it, the same feed without ``compare:`` sends every
row (1,000 chunks).  Target: the compare run's peak RSS <= 150 MB, and it sends exactly the
10,000 changed rows.  The store's database is written once by this script (the goods table as the
store makes it) and copied fresh for each run, so every run meets the same store.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

from common import (
    BenchError,
    Sample,
    Work,
    alternate,
    fmt_mb,
    fmt_run,
    median,
    pooler_cmd,
    read_answer,
    run_process,
    series,
    store,
    work,
)
from summary import Row, Settings, main_for

ROWS = 1_000_000
#: Every 100th row of the feed has another price than the store's: 1 %.
EVERY = 100
CHUNK = 1_000
LIMIT_BYTES = 150e6
#: A run of a million rows takes a minute or more: at most this many measured runs.
RUNS = 3

STORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS goods (
    id INTEGER PRIMARY KEY AUTOINCREMENT, sku TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
    price REAL NOT NULL DEFAULT 0, curr_id INTEGER);
"""


def price(n: int) -> str:
    return f"{10 + n % 90}.50"


def write_feed(path: Path, rows: int) -> int:
    """The feed: every ``EVERY``-th row's price 1.00 above the store's."""
    with path.open("w", encoding="utf-8") as out:
        out.write("sku,name,price\n")
        for n in range(rows):
            shown = f"{11 + n % 90}.50" if n % EVERY == 0 else price(n)
            out.write(f"S{n:07d},Goods {n},{shown}\n")
    return path.stat().st_size


def write_store_db(path: Path, rows: int) -> None:
    """The store's goods, as the feed had them before 1 % changed."""
    db = sqlite3.connect(path)
    try:
        db.executescript(STORE_SCHEMA)
        with db:
            db.executemany("INSERT INTO goods (sku, name, price) VALUES (?, ?, ?)",
                           ((f"S{n:07d}", f"Goods {n}", float(price(n))) for n in range(rows)))
    finally:
        db.close()


def write_pool(path: Path, *, compare: bool) -> Path:
    lines = ["pool:", "  - name: goods", "    unit: MELBIS_AGENT_IMPORT_GOODS", "    command: CmdAdd",
             f"    for_each: {{file: feed.csv, chunk: {CHUNK}, field: goods}}", "    key: feed-${row.sku}"]
    if compare:
        lines += ["    compare: {unit: MELBIS_AGENT_STORE, command: CmdList, table: goods,",
                  "              match: {sku: sku}, fields: {name: name, price: price}}"]
    path.write_text("\n".join([*lines, "include_results: false", ""]), encoding="utf-8")
    return path


def one_run(w: Work, pool: Path, seed: Path, calls: int, label: str) -> Sample:
    """A run of ``pool`` against a store on a fresh copy of ``seed``: its time, CPU and peak RSS."""
    folder = w.fresh(label)
    db = folder / "store.db"
    shutil.copyfile(seed, db)
    with store(w, "--db", str(db), "--latency-ms", "0") as st:
        cmd = [*pooler_cmd(), "run", str(pool), "--store", st.url, "--token-file", str(w.token_file),
               "--out", str(folder / "out"), "--journal", str(folder / "journal.db"),
               "--task", f"bench-{folder.name}", "--json"]
        sample, out_path, _ = run_process(cmd, w, label=label, peak_memory=True, store=st)
    answer = read_answer(out_path)
    if answer.get("status") != "completed" or answer.get("succeeded") != calls:
        raise BenchError(f"the {label} run did not send its {calls} calls: status {answer.get('status')!r}, "
                         f"succeeded {answer.get('succeeded')!r}")
    step = answer["steps"][0]
    sample.extra["sent_rows"] = step["rows"]["total"]
    sample.extra["unchanged"] = answer.get("unchanged", 0)
    return sample


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("compare") as w:
        feed_bytes = write_feed(w.tmp / "feed.csv", ROWS)
        seed = w.tmp / "seed.db"
        write_store_db(seed, ROWS)
        compared = write_pool(w.tmp / "compare.yaml", compare=True)
        plain = write_pool(w.tmp / "plain.yaml", compare=False)
        changed = -(-ROWS // EVERY)
        samples = alternate({
            "compare": lambda: one_run(w, compared, seed, -(-changed // CHUNK), "compare"),
            "plain": lambda: one_run(w, plain, seed, -(-ROWS // CHUNK), "plain"),
        }, min(settings.runs, RUNS), warmup=False)
    runs = samples["compare"]
    peak = median([float(s.peak_rss or 0) for s in runs])
    sent = {int(s.extra["sent_rows"]) for s in runs}
    plain_peak = median([float(s.peak_rss or 0) for s in samples["plain"]])
    data = {"compare": series(runs), "plain": series(samples["plain"]), "feed_bytes": feed_bytes,
            "sent_rows": sorted(sent), "unchanged": [s.extra["unchanged"] for s in runs]}
    took, plain_took = median([s.seconds for s in runs]), median([s.seconds for s in samples["plain"]])
    rows = [
        Row(f"compare: {ROWS:,} rows against {ROWS:,}, 1 % changed, memory", f"peak RSS {fmt_mb(peak)}",
            f"limit {fmt_mb(LIMIT_BYTES)}; without compare {fmt_mb(plain_peak)}", peak / LIMIT_BYTES,
            "≤ 150 MB", peak <= LIMIT_BYTES, data),
        Row(f"compare: {ROWS:,} rows, rows sent", f"{', '.join(f'{n:,}' for n in sorted(sent))} rows",
            f"{changed:,} changed", None, f"= {changed:,}", sent == {changed}, {}),
        Row(f"compare: {ROWS:,} rows, time", fmt_run(runs), f"without compare {fmt_run(samples['plain'])}",
            took / plain_took, "report", None, {}),
    ]
    notes = [(f"compare: the feed is {fmt_mb(feed_bytes)}; the store's CmdList answers its {ROWS:,} goods in "
              "one answer, which the run reads and matches in its journal")]
    return rows, notes


if __name__ == "__main__":
    sys.exit(main_for("compare_cost", __doc__ or "", case))
