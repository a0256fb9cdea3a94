"""Check speed: ``pooler check`` of a generated 10,000-step pool, as YAML and as JSON.

Every step is keyed and refers to the one before it, so the reference and key checks have work.
Target: <= 2 s a check, start-up included.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

from common import Sample, Work, alternate, fmt_run, fmt_s, pooler_cmd, run_process, secs, series, work
from generate import write_json_pool, write_yaml_pool
from summary import Row, Settings, main_for

STEPS = 10_000
LIMIT_S = 2.0


def check(w: Work, path: Path) -> Sample:
    return run_process([*pooler_cmd(), "check", str(path)], w, label="check")[0]


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("check") as w:
        files = {"YAML": write_yaml_pool(w.tmp / "big.yaml", STEPS),
                 "JSON": write_json_pool(w.tmp / "big.json", STEPS, keyed=True)}
        samples = alternate({kind: partial(check, w, path) for kind, path in files.items()}, settings.runs)
        sizes = {kind: path.stat().st_size for kind, path in files.items()}
    rows = []
    for kind in files:
        t = secs(samples[kind])
        rows.append(Row(f"check speed: 10,000 steps, {kind}", fmt_run(samples[kind]),
                        f"limit {fmt_s(LIMIT_S)}", t / LIMIT_S, f"≤ {LIMIT_S:.0f} s", t <= LIMIT_S,
                        {**series(samples[kind]), "file_bytes": sizes[kind]}))
    return rows, []


if __name__ == "__main__":
    sys.exit(main_for("check_speed", __doc__ or "", case))
