"""Big tables: ``pooler call MELBIS_AGENT_TEST CmdTable`` of 200,000 rows, written to its jsonl file.

Peak memory is the RSS high-water mark of the pooler process alone. The answer's size is the
body the store sends, counted by streaming the same call here. Target: peak <= 3 × that size.
The same call of one row shows what the process needs before any table; a second row compares
what the table adds over that floor with the same target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import requests
from common import (
    TOKEN,
    BenchError,
    Sample,
    Work,
    alternate,
    fmt_mb,
    median,
    pooler_cmd,
    run_process,
    store,
    work,
)
from summary import Row, Settings, main_for

ROWS = 200_000
TARGET = 3.0


def answer_size(url: str, rows: int) -> int:
    """The bytes of the store's answer, read in chunks so this process stays small."""
    body = {"unit": "MELBIS_AGENT_TEST", "command": "CmdTable", "params": {"rows": rows}}
    size = 0
    with requests.post(f"{url}/tool_run", json=body, headers={"Authorization": f"Bearer {TOKEN}"},
                       stream=True, timeout=(5, 300)) as reply:
        reply.raise_for_status()
        for chunk in reply.iter_content(1 << 16):
            size += len(chunk)
    return size


def count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def call(w: Work, url: str, rows: int) -> Sample:
    folder = w.fresh(f"call{rows}")
    cmd = [*pooler_cmd(), "call", "MELBIS_AGENT_TEST", "CmdTable", "--params", json.dumps({"rows": rows}),
           "--store", url, "--token-file", str(w.token_file), "--out", str(folder / "out")]
    sample = run_process(cmd, w, label="call", peak_memory=True)[0]
    files = sorted((folder / "out").rglob("*rows*.jsonl"))
    if not files:
        raise BenchError(f"pooler call wrote no rows table under {folder / 'out'}")
    written = count_lines(files[0])
    if written != rows:
        raise BenchError(f"{files[0]} holds {written} rows, not {rows}")
    return sample


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("tables") as w, store(w) as st:
        size = answer_size(st.url, ROWS)
        samples = alternate({"big": lambda: call(w, st.url, ROWS), "one": lambda: call(w, st.url, 1)},
                            settings.runs)
    peaks = [float(s.peak_rss or 0) for s in samples["big"]]
    peak, base = median(peaks), median([float(s.peak_rss or 0) for s in samples["one"]])
    ratio, own = peak / size, (peak - base) / size
    data = {"peak_rss": peaks, "answer_bytes": size, "one_row_peak_rss": base,
            "seconds": [s.seconds for s in samples["big"]]}
    rows = [
        Row(f"big tables: CmdTable {ROWS:,} rows", f"peak RSS {fmt_mb(peak)}", f"answer {fmt_mb(size)}",
            ratio, f"≤ {TARGET:.1f} × answer", ratio <= TARGET, data),
        Row("big tables: the table's own memory", f"{fmt_mb(peak - base)} over the 1-row call",
            f"answer {fmt_mb(size)}", own, f"≤ {TARGET:.1f} × answer", own <= TARGET, data),
    ]
    note = (f"big tables: the same call of one row peaks at {fmt_mb(base)} "
            f"({base / size:.1f} × this answer): that floor is the interpreter and its imports")
    return rows, [note]

if __name__ == "__main__":
    sys.exit(main_for("big_tables", __doc__ or "", case))
