"""Monitoring: the sequential 2,000-call pool with ``--metrics-file``, with ``--trace`` (spans sent
over OTLP/HTTP to a receiver in this process on 127.0.0.1), and with both, against the same pool
without either.

Each run has a fresh journal, task and metrics file. The receiver answers every export at once and
counts the spans' bytes, so the traced runs are known to have sent their spans. Targets: metrics /
plain <= 1.05, trace / plain <= 1.25.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from common import BenchError, alternate, fmt_run, idle_estimate, run_pool, secs, series, store, work
from generate import write_json_pool
from summary import Row, Settings, main_for

CALLS = 2000
METRICS_TARGET = 1.05
TRACE_TARGET = 1.25


class Receiver:
    def __init__(self) -> None:
        self.exports = 0
        self.bytes = 0
        self.lock = threading.Lock()


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Receiver]]:
    """An OTLP/HTTP endpoint that takes every export and answers 200 at once."""
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with got.lock:
                got.exports += 1
                got.bytes += len(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


def case(settings: Settings) -> tuple[list[Row], list[str]]:
    with work("monitoring") as w, store(w) as st, otlp_receiver() as (endpoint, got):
        w.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        w.env["OTEL_SERVICE_NAME"] = "pooler-bench"
        pool = write_json_pool(w.tmp / "chain.json", CALLS)
        metrics = ("--metrics-file", "{folder}/pooler.prom")
        samples = alternate({
            "plain": lambda: run_pool(w, st, pool, CALLS, label="plain"),
            "metrics": lambda: run_pool(w, st, pool, CALLS, label="metrics", extra=metrics),
            "trace": lambda: run_pool(w, st, pool, CALLS, label="trace", extra=("--trace",)),
            "both": lambda: run_pool(w, st, pool, CALLS, label="both", extra=(*metrics, "--trace")),
        }, settings.runs)
        traced_runs = 2 * (settings.runs + 1)
        if got.exports < traced_runs:
            raise BenchError(f"monitoring: the receiver got {got.exports} exports from {traced_runs} traced "
                             "runs - the spans were not sent")
        span_bytes = got.bytes / traced_runs
    plain = secs(samples["plain"])
    rows = []
    for name, label, target in (("metrics", "--metrics-file", METRICS_TARGET),
                                ("trace", "--trace", TRACE_TARGET),
                                ("both", "--metrics-file --trace", TRACE_TARGET)):
        took = secs(samples[name])
        rows.append(Row(f"monitoring: {label} vs plain (2,000 calls)", f"{name} {fmt_run(samples[name])}",
                        f"plain {fmt_run(samples['plain'])}", took / plain, f"≤ {target:.2f}",
                        took / plain <= target,
                        {name: series(samples[name]), "plain": series(samples["plain"]),
                         "idle_estimate": idle_estimate(samples[name], samples["plain"])}))
    notes = [
        f"monitoring: {name} as an idle machine would see it, from CPU times (client + store): "
        f"{idle_estimate(samples[name], samples['plain']):.2f}" for name in ("metrics", "trace", "both")
    ]
    notes.append(f"monitoring: a traced run of {CALLS:,} calls sent {span_bytes / 1e6:.2f} MB of spans")
    return rows, notes


if __name__ == "__main__":
    sys.exit(main_for("monitoring_cost", __doc__ or "", case))
