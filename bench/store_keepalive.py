"""Keep-alive speed of the reference store: 1,000 CmdEcho calls on one requests.Session.

Starts its own store on a free port (its db and root in a temporary folder) and prints the time
per call. Each answer leaves the store in one write with TCP_NODELAY set; were it two writes, every
keep-alive call would stall about 40 ms on delayed ACKs, and this would print ~40 ms, not ~1-2 ms.

    python bench/store_keepalive.py [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "keepalive-token-83f2"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pooler-keepalive-") as tmp:
        proc = subprocess.Popen([sys.executable, "-m", "pooler", "store", "serve", "--port", "0",
                                 "--db", f"{tmp}/store.db", "--root", f"{tmp}/root", "--token", TOKEN],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            if not url.startswith("http://"):
                print(f"the store did not start: {url!r} {proc.stderr.read() if proc.stderr else ''}")
                return 1
            times = _run(url, args.calls)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    times.sort()
    print(f"{args.calls} keep-alive CmdEcho calls on one session")
    mean, median = statistics.fmean(times) * 1000, times[len(times) // 2] * 1000
    print(f"  per call: mean {mean:.2f} ms, median {median:.2f} ms, "
          f"p95 {times[int(len(times) * 0.95)] * 1000:.2f} ms, max {times[-1] * 1000:.2f} ms")
    print(f"  total: {sum(times):.2f} s")
    return 0


def _run(url: str, calls: int) -> list[float]:
    times: list[float] = []
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {TOKEN}"
        body = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 0}}
        session.post(f"{url}/tool_run", json=body, timeout=10).raise_for_status()  # the connection is opened
        for n in range(calls):
            body["params"] = {"n": n}
            t0 = time.perf_counter()
            resp = session.post(f"{url}/tool_run", json=body, timeout=10)
            times.append(time.perf_counter() - t0)
            if resp.json()["data"]["detail"] != {"n": n}:
                raise SystemExit(f"call {n} answered {resp.text[:200]}")
    return times


if __name__ == "__main__":
    sys.exit(main())
