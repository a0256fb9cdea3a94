"""``pooler run --trace``: OpenTelemetry spans sent over OTLP/HTTP, received here by a real receiver
(an HTTP server on 127.0.0.1 decoding each export with the official ``opentelemetry-proto``
classes), and the W3C ``traceparent`` of each call as the store recorded it in its ``ops``."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, STORE_TOKEN, Store, answer_of, pooler, serving
from promcheck import metrics_files_pass_promtool  # noqa: F401 - autouse: each file passes promtool

pb = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2",
                         reason="opentelemetry-proto is not installed (pip install -e '.[dev]')")
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status  # noqa: E402

TEST = "MELBIS_AGENT_TEST"
BARE_ENV = {"PATH": "/usr/bin:/bin", "POOLER_TOKEN": STORE_TOKEN}
SECRET = "sig-0815-never-in-a-span-Xw"
POOL = """\
mode: parallel
max_concurrency: 4
stop_on_error: false
vars:
  signature: {env: SHOP_SIGNATURE, secret: true}
pool:
  - name: first
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    key: first-${signature}
    params: {signature: "${signature}", n: 7}
  - name: chained
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    params: {from_first: "@first.n"}
  - name: each
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    params: {n: "${row.n}"}
    for_each: {file: rows.csv}
  - name: refused
    unit: MELBIS_AGENT_CURRENCY
    command: CmdUpdate
    params: {id: "${signature}"}
  - name: lost
    unit: MELBIS_AGENT_TEST
    command: CmdNoResult
"""


@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver: every export's raw body and its decoded spans."""

    url: str
    bodies: list[bytes] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attrs(span: Span) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in span.attributes}


@contextlib.contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            request = pb.ExportTraceServiceRequest()
            request.ParseFromString(body)
            with receiver.lock:
                receiver.bodies.append(body)
                for resource_spans in request.resource_spans:
                    receiver.resources.append({kv.key: _value(kv.value)
                                               for kv in resource_spans.resource.attributes})
                    for scope in resource_spans.scope_spans:
                        receiver.spans.extend(scope.spans)
            answer = pb.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield receiver


def traced_run(store: Store, tmp_path: Path, endpoint: str, *extra: str,
               pool_text: str = POOL) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rows.csv").write_text("n\n1\n2\n3\n", encoding="utf-8")
    pool = tmp_path / "nightly.yaml"
    pool.write_text(pool_text, encoding="utf-8")
    return pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), "--json", *extra,
                  env={"POOLER_TOKEN": STORE_TOKEN, "SHOP_SIGNATURE": SECRET,
                       "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "nightly-import"})


def test_a_traced_run_sends_run_step_and_call_spans_that_the_stores_ops_join(
        store: Store, tmp_path: Path) -> None:
    with otlp_receiver() as receiver:
        done = traced_run(store, tmp_path, receiver.url, "--trace")
    assert done.returncode == 1, done.stderr
    answer = answer_of(done)
    assert (answer["succeeded"], answer["calls_in_doubt"]) == (5, 1)
    spans = receiver.spans
    assert receiver.resources[0]["service.name"] == "nightly-import"
    # One trace: the run, its five steps, its seven calls.
    assert len({s.trace_id for s in spans}) == 1
    runs = [s for s in spans if s.name == "pooler run"]
    assert len(runs) == 1
    run = runs[0]
    assert run.parent_span_id == b""
    steps = {attrs(s)["pooler.step"]: s for s in spans if s.name.startswith("step ")}
    calls = [s for s in spans if s.name.startswith("call ")]
    assert sorted(steps) == [1, 2, 3, 4, 5]
    assert len(calls) == 7
    assert all(s.parent_span_id == run.span_id for s in steps.values())
    by_id = {s.span_id: s for s in steps.values()}
    for call in calls:
        parent = by_id[call.parent_span_id]
        assert attrs(parent)["pooler.step"] == attrs(call)["pooler.step"]
        # A call lies within its step, and its step within the run.
        assert parent.start_time_unix_nano <= call.start_time_unix_nano <= call.end_time_unix_nano
        assert call.end_time_unix_nano <= parent.end_time_unix_nano <= run.end_time_unix_nano
    a = {attrs(s)["pooler.step_id"]: attrs(s) for s in calls}
    task = answer["task"]
    first = a[f"{task}-1-1"]
    assert first["pooler.unit"] == TEST
    assert first["pooler.command"] == "CmdEcho"
    assert first["pooler.status"] == "completed"
    assert first["pooler.answer_kind"] == "done"
    assert first["pooler.key"] == "first-***"
    assert first["pooler.attempt"] == 1
    assert first["pooler.in_doubt"] is False
    assert isinstance(first["pooler.time.server_ms"], int)
    assert isinstance(first["pooler.time.module_ms"], int)
    assert sorted(v["pooler.row"] for v in a.values() if "pooler.row" in v) == [0, 1, 2]
    refused = a[f"{task}-4-1"]
    assert (refused["pooler.status"], refused["pooler.answer_kind"]) == ("failed", "refused")
    lost = a[f"{task}-5-1"]
    assert (lost["pooler.status"], lost["pooler.answer_kind"], lost["pooler.in_doubt"]) == (
        "in_doubt", "crashed", True)
    status = {attrs(s)["pooler.step_id"]: s.status for s in calls}
    assert status[f"{task}-1-1"].code == Status.STATUS_CODE_OK
    assert status[f"{task}-4-1"].code == Status.STATUS_CODE_ERROR
    # In doubt is not failed: its status stays unset.
    assert status[f"{task}-5-1"].code == Status.STATUS_CODE_UNSET
    assert run.status.code == Status.STATUS_CODE_ERROR
    assert attrs(run)["pooler.pool"] == "nightly.yaml"
    assert (attrs(run)["pooler.failed"], attrs(run)["pooler.in_doubt"]) == (1, 1)
    assert attrs(steps[3])["pooler.rows.completed"] == 3
    # Each call the store carried out holds the traceparent of its call span.
    parents = {f"00-{s.trace_id.hex()}-{s.span_id.hex()}": attrs(s) for s in calls}
    ops = store.ops()
    assert len(ops) == 6  # the refused call never ran a command
    for op in ops:
        head, flags = op["traceparent"].rsplit("-", 1)
        assert int(flags, 16) & 1  # sampled
        assert parents[head]["pooler.command"] == op["command"]
    assert len({op["traceparent"] for op in ops}) == 6
    # No secret, and never the token, in any byte the collector got.
    for body in receiver.bodies:
        assert SECRET.encode() not in body
        assert STORE_TOKEN.encode() not in body


def test_the_run_span_tells_what_flow_control_did(store: Store, tmp_path: Path) -> None:
    pool_text = ("mode: parallel\nmax_concurrency: 8\nadaptive: true\npool:\n"
                 "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, for_each: {file: rows.csv}, "
                 "params: {n: \"${row.n}\"}}\n")
    with otlp_receiver() as receiver:
        done = traced_run(store, tmp_path, receiver.url, "--trace", pool_text=pool_text)
    assert done.returncode == 0, done.stderr
    flow = answer_of(done)["flow"]
    run = next(s for s in receiver.spans if s.name == "pooler run")
    told = {k.removeprefix("pooler.flow."): v for k, v in attrs(run).items() if k.startswith("pooler.flow.")}
    assert told == flow
    assert told["highest_width"] >= 2


def test_a_collector_that_is_down_costs_the_run_one_warning_line(store: Store, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens there now.
    (tmp_path / "plain").mkdir()
    (tmp_path / "traced").mkdir()
    plain = traced_run(store, tmp_path / "plain", f"http://127.0.0.1:{port}")
    traced = traced_run(store, tmp_path / "traced", f"http://127.0.0.1:{port}", "--trace")
    assert traced.returncode == plain.returncode == 1
    def outcome(done: subprocess.CompletedProcess[str]) -> list[Any]:
        answer = answer_of(done)
        return [answer["status"], answer["succeeded"], answer["failed"], answer["calls_in_doubt"],
                [(s["num"], s["status"]) for s in answer["steps"]]]

    assert outcome(traced) == outcome(plain)
    warning = [line for line in traced.stderr.splitlines() if "WARNING" in line]
    assert len(traced.stderr.splitlines()) == len(plain.stderr.splitlines()) + 1
    assert warning == [(f"pooler: WARNING: --trace: the collector at http://127.0.0.1:{port}/v1/traces "
                        "did not take the spans; they are dropped and the run goes on without them")]
    assert "Traceback" not in traced.stderr


def test_a_run_without_trace_imports_no_opentelemetry_module(store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "p.json"
    pool.write_text(json.dumps({"pool": [{"unit": TEST, "command": "CmdEcho"}]}), encoding="utf-8")
    script = (
        "import sys\n"
        "from pooler.cli.main import main\n"
        f"code = main(['run', {str(pool)!r}, '--store', {store.url!r}, '--out', {str(tmp_path / 'out')!r},"
        f" '--journal', {str(tmp_path / 'j.sqlite')!r}, '--metrics-file', {str(tmp_path / 'm.prom')!r}])\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=BARE_ENV, timeout=120, check=False)
    assert done.stdout.splitlines()[-1] == "0 []", done.stderr


def test_trace_without_the_otel_extra_is_refused_before_anything_is_sent(
        store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "p.json"
    pool.write_text(json.dumps({"pool": [{"unit": TEST, "command": "CmdEcho"}]}), encoding="utf-8")
    # As if the extra were not installed: importing opentelemetry fails.
    script = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "from pooler.cli.main import main\n"
        f"sys.exit(main(['run', {str(pool)!r}, '--store', {store.url!r}, '--out', {str(tmp_path / 'out')!r},"
        f" '--journal', {str(tmp_path / 'j.sqlite')!r}, '--trace']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=BARE_ENV, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr == (
        "pooler: --trace: OpenTelemetry is not installed - install pooler with its otel extra "
        "(pip install 'pooler[otel]'), or run without --trace\n"
        "pooler: refused before the first step; nothing was sent.\n")
    assert store.ops() == []


def test_an_exporter_pooler_does_not_speak_is_refused_before_anything_is_sent(
        store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "p.json"
    pool.write_text(json.dumps({"pool": [{"unit": TEST, "command": "CmdEcho"}]}), encoding="utf-8")
    refused = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                     "--journal", str(tmp_path / "journal.sqlite"), "--trace",
                     env={"POOLER_TOKEN": STORE_TOKEN, "OTEL_TRACES_EXPORTER": "zipkin"})
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[0] == (
        "pooler: --trace: OTEL_TRACES_EXPORTER=zipkin: pooler sends spans over OTLP/HTTP (otlp), prints "
        "them to stderr (console), or sends none (none)")
    assert store.ops() == []
