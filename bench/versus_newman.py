"""The per-call case against Newman: the same 2,000 chained calls as a Postman collection.

Newman is installed from the npm registry into bench/newman/node_modules on first use; where npm
is missing or the install fails the case is skipped with the reason. Reports pooler / newman.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from common import BENCH, TOKEN, Work, alternate, fmt_run, run_pool, run_process, secs, series, store, work
from generate import write_collection, write_json_pool
from summary import Row, Settings, main_for

CALLS = 2000
PREFIX = BENCH / "newman"
NEWMAN = PREFIX / "node_modules" / ".bin" / "newman"
INSTALL_TIMEOUT = 600


def install_newman(w: Work) -> str | None:
    """Newman's path after ``npm install``, or why it cannot be had (the case is then skipped)."""
    if NEWMAN.exists():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed: install Node.js (18 or later) to compare with newman"
    cmd = [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--no-package-lock"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                              cwd=PREFIX, env=w.env, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npm install of newman failed: {exc}"
    if done.returncode != 0 or not NEWMAN.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return f"npm install of newman failed (exit {done.returncode}): {' / '.join(tail)}"
    return None


def skipped(why: str) -> tuple[list[Row], list[str]]:
    return [Row("vs newman (2,000 calls)", "skipped", "—", None, "report", None, {"skipped": why})], [
        f"vs newman skipped: {why}"]


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("newman") as w:
        why = install_newman(w)
        if why is not None:
            return skipped(why)
        with store(w) as st:
            pool = write_json_pool(w.tmp / "echo.json", CALLS)
            collection = write_collection(w.tmp / "echo.postman_collection.json", st.url, TOKEN, CALLS)
            newman = [str(NEWMAN), "run", str(collection), "--reporters", "cli", "--color", "off",
                      "--disable-unicode"]
            samples = alternate({
                "pooler": lambda: run_pool(w, st, pool, CALLS),
                "newman": lambda: run_process(newman, w, label="newman", store=st)[0],
            }, settings.runs)
    p, n = secs(samples["pooler"]), secs(samples["newman"])
    row = Row("vs newman (2,000 calls)", f"pooler run {fmt_run(samples['pooler'])}",
              f"newman {fmt_run(samples['newman'])}", p / n, "report", None,
              {"pooler": series(samples["pooler"]), "newman": series(samples["newman"])})
    return [row], [f"vs newman: newman takes {n / p:.1f}× as long as pooler for the same calls"]


if __name__ == "__main__":
    sys.exit(main_for("versus_newman", __doc__ or "", case))
