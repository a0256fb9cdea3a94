"""Start-up: ``pooler check pools/demo.yaml`` against the floor ``python -c "import requests, yaml"``.

Each process is short, so this case takes four times the configured number of runs.
Target: pooler / floor <= 1.5.
"""

from __future__ import annotations

import sys

from common import PYTHON, ROOT, BenchError, alternate, fmt_run, pooler_cmd, run_process, secs, series, work
from summary import Row, Settings, main_for

DEMO = ROOT / "pools" / "demo.yaml"
TARGET = 1.5
REPEAT = 4


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    if not DEMO.is_file():
        raise BenchError(f"{DEMO.relative_to(ROOT)} is missing: the start-up case checks the demo pool")
    check = [*pooler_cmd(), "check", str(DEMO)]
    floor = [PYTHON, "-c", "import requests, yaml"]
    with work("startup") as w:
        samples = alternate({
            "check": lambda: run_process(check, w, label="check", cwd=ROOT)[0],
            "floor": lambda: run_process(floor, w, label="floor")[0],
        }, settings.runs * REPEAT)
    c, f = secs(samples["check"]), secs(samples["floor"])
    row = Row("start-up: pooler check pools/demo.yaml", fmt_run(samples["check"]),
              f"import requests, yaml {fmt_run(samples['floor'])}", c / f, f"≤ {TARGET:.2f}", c / f <= TARGET,
              {"check": series(samples["check"]), "floor": series(samples["floor"])})
    note = f"start-up: pooler check takes {(c - f) * 1000:.0f} ms more wall time than the import"
    return [row], [note]


if __name__ == "__main__":
    sys.exit(main_for("startup", __doc__ or "", case))
