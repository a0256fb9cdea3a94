"""``--trace``: OpenTelemetry spans of a run (run, step, call), sent by the official SDK's OTLP/HTTP
exporter, with the W3C ``traceparent`` of each call sent to the store so its records join the trace.

Only ``pooler[otel]`` brings the SDK, and only ``--trace`` imports this module.  The standard
variables configure it: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``),
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME`` (default ``pooler``),
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console`` to stderr, or
``none``).  Spans go through a ``BatchSpanProcessor``: a call costs a span's bookkeeping, and the
sending happens on the SDK's thread and once at the end.  A collector that is down costs a warning
and at most ``FLUSH_SECONDS`` at the end; the run itself never waits for it.

Every name and attribute value passes through the run's ``Redactor``: a secret in a key, a step name
or a store's message never reaches a span.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Span, Status, StatusCode

import pooler
from pooler.errors import UsageError
from pooler.journal.documents import Answer, Entry
from pooler.pool.model import Pool, Step
from pooler.redact import Redactor
from pooler.run.events import CallEnd
from pooler.statuses import LANDED, CallStatus, StepStatus

#: The longest the end of a run waits for the collector to take its spans.
FLUSH_SECONDS = 3.0
EXPORTERS = ("otlp", "console", "none")
#: Spans go in large batches: an export encodes on the SDK's thread, and each export that runs while
#: calls go takes the interpreter from them for a while.  The queue holds 8 batches, enough for
#: a fast store's calls while one batch is sent.
BATCH_SPANS = 2048


class _Guarded(SpanExporter):
    """The exporter, told once when it fails; after that its batches are dropped, not retried."""

    def __init__(self, inner: SpanExporter, where: str, warn: Callable[[str], None]) -> None:
        self.inner = inner
        self.where = where
        self.warn = warn
        self.down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.down:
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception:  # noqa: BLE001 - an exporter's failure must not reach the run
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.fail()
        return result

    def fail(self) -> None:
        if not self.down:
            self.down = True
            self.warn(f"pooler: WARNING: --trace: the collector at {self.where} did not take the spans; "
                      "they are dropped and the run goes on without them")

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class Tracing:
    """The process's tracer: one provider, its batch processor and its exporter, from OTEL_*."""

    def __init__(self, environ: Mapping[str, str], warn: Callable[[str], None]) -> None:
        names = [n.strip() for n in (environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",") if n.strip()]
        for name in names:
            if name not in EXPORTERS:
                raise UsageError(f"--trace: OTEL_TRACES_EXPORTER={name}: pooler sends spans over OTLP/HTTP "
                                 "(otlp), prints them to stderr (console), or sends none (none)")
        protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                    or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
        if "otlp" in names and protocol != "http/protobuf":
            raise UsageError(f"--trace: OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: pooler speaks OTLP over "
                             "HTTP with protobuf (http/protobuf) - point it at the collector's HTTP port "
                             "(4318)")
        resource = Resource.create({"service.version": pooler.__version__})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "pooler"}))
        # Shut down by ``close``, bounded: the SDK's own exit hook could wait 30 s for a collector.
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.exporters: list[_Guarded] = []
        for name in names:
            if name == "none":
                continue
            if name == "console":
                # stdout belongs to --json: one document and nothing else.
                inner: SpanExporter = ConsoleSpanExporter(out=sys.stderr)
                where = "stderr"
            else:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                    OTLPSpanExporter,
                )
                inner = OTLPSpanExporter()
                where = _shown(str(getattr(inner, "_endpoint", "") or "the OTLP endpoint"))
            guarded = _Guarded(inner, where, warn)
            self.exporters.append(guarded)
            self.provider.add_span_processor(BatchSpanProcessor(
                guarded, max_export_batch_size=_batch(environ, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", BATCH_SPANS),
                max_queue_size=_batch(environ, "OTEL_BSP_MAX_QUEUE_SIZE", 8 * BATCH_SPANS),
                schedule_delay_millis=_batch(environ, "OTEL_BSP_SCHEDULE_DELAY", 10000)))
        # The SDK's exporters log every failed try; the one warning above says it once.
        logging.getLogger("opentelemetry").addHandler(logging.NullHandler())
        logging.getLogger("opentelemetry").propagate = False
        self.tracer = self.provider.get_tracer("pooler", pooler.__version__)
        self._local = threading.local()

    def enter(self, span: Span | None) -> Span | None:
        """``span`` is what the current thread's requests belong to; the one it replaces comes back."""
        before: Span | None = getattr(self._local, "span", None)
        self._local.span = span
        # Made once per span, not once per request (a call tried again sends it again).
        self._local.header = traceparent(span) if span is not None else {}
        return before

    def headers(self) -> dict[str, str]:
        """The ``traceparent`` of the span the current thread's request belongs to (for
        ``ToolRunClient.call_headers``), or none."""
        found: dict[str, str] = getattr(self._local, "header", {})
        return found

    def flush(self) -> None:
        """Send what is buffered, waiting at most ``FLUSH_SECONDS``."""
        done = threading.Event()

        def run() -> None:
            self.provider.force_flush(int(FLUSH_SECONDS * 1000))
            done.set()

        threading.Thread(target=run, name="pooler-trace-flush", daemon=True).start()
        if not done.wait(FLUSH_SECONDS):
            for exporter in self.exporters:
                exporter.fail()
                # Ends the exporter's retries; its thread is a daemon and dies with the process.
                exporter.inner.shutdown()

    def close(self) -> None:
        self.flush()
        if not any(e.down for e in self.exporters):
            self.provider.shutdown()


def _batch(environ: Mapping[str, str], name: str, default: int) -> int | None:
    """pooler's batching, unless the standard variable asks for another (then the SDK reads it)."""
    return None if environ.get(name) else default


def _shown(url: str) -> str:
    """An endpoint as a message shows it: never with a user or password."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rsplit('@', 1)[-1]}{slash}{path}"


def traceparent(span: Span) -> dict[str, str]:
    """The W3C Trace Context header of ``span``: version, trace id, span id, flags."""
    context = span.get_span_context()
    flags = int(context.trace_flags)
    return {"traceparent": f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"}


class TraceReporter:
    """A run as spans: the run, a span per step under it, a span per call under its step.

    ``parent`` puts the run under another span (a tool call of ``pooler mcp``).  While a call is
    sent, its span is the thread's (``Tracing.enter``), so its requests carry its ``traceparent``.
    """

    def __init__(self, tracing: Tracing, redactor: Redactor, *, store: str, parent: Span | None = None,
                 name: str = "pooler run") -> None:
        self.tracing = tracing
        self.tracer = tracing.tracer
        self.redactor = redactor
        self.store = store
        self.parent = parent
        self.name = name
        self.run: Span | None = None
        self._lock = threading.Lock()
        self._steps: dict[int, Span] = {}
        self._calls: dict[int, Span] = {}
        #: What each call's thread belonged to before the call: given back when it ends.
        self._before: dict[int, Span | None] = {}

    def _text(self, value: Any) -> str:
        return self.redactor.text(str(value))

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        context = trace.set_span_in_context(self.parent) if self.parent is not None else None
        self.run = self.tracer.start_span(self.name, context=context, attributes={
            "pooler.pool": self._text(Path(pool.file).name), "pooler.task": self._text(task_id),
            "pooler.store": self._text(self.store), "pooler.mode": pool.options.mode,
            "pooler.calls_planned": total})

    def _step(self, step: Step) -> Span:
        with self._lock:
            found = self._steps.get(step.num)
            if found is None:
                context = trace.set_span_in_context(self.run) if self.run is not None else None
                attributes: dict[str, Any] = {"pooler.step": step.num, "pooler.unit": self._text(step.unit),
                                              "pooler.command": self._text(step.command)}
                if step.name:
                    attributes["pooler.step_name"] = self._text(step.name)
                found = self._steps[step.num] = self.tracer.start_span(
                    self._text(f"step {step.num} {step.label}"), context=context, attributes=attributes)
            return found

    def step_started(self, step: Step, call: int) -> None:
        parent = self._step(step)
        span = self.tracer.start_span(self._text(f"call {step.unit}.{step.command}"),
                                      context=trace.set_span_in_context(parent),
                                      attributes={"pooler.call": call, "pooler.step": step.num,
                                                  "pooler.unit": self._text(step.unit),
                                                  "pooler.command": self._text(step.command)})
        before = self.tracing.enter(span)
        with self._lock:
            self._calls[call] = span
            self._before[call] = before

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        with self._lock:
            span = self._calls.pop(end.number, None)
            before = self._before.pop(end.number, None)
        self.tracing.enter(before)
        if span is None:
            return
        status = str(result.get("status"))
        span.set_attributes({"pooler.status": status, "pooler.answer_kind": end.kind,
                             "pooler.attempt": end.attempts,
                             "pooler.in_doubt": status == CallStatus.IN_DOUBT})
        if result.get("key") is not None:
            span.set_attribute("pooler.key", self._text(result["key"]))
        rows = result.get("rows")
        if isinstance(rows, list) and len(rows) == 2:
            span.set_attributes({"pooler.row": int(rows[0]), "pooler.row_last": int(rows[1])})
        elif isinstance(result.get("row"), int):
            span.set_attribute("pooler.row", int(result["row"]))
        if result.get("step_id") is not None:
            span.set_attribute("pooler.step_id", self._text(result["step_id"]))
        if result.get("sent_again"):
            span.set_attribute("pooler.sent_again", self._text(result["sent_again"]))
        took = result.get("time")
        if isinstance(took, dict):
            for name in ("server", "module", "trip", "sql_ms"):
                if isinstance(took.get(name), int | float):
                    span.set_attribute(f"pooler.time.{name}_ms", took[name])
        _set_status(span, status, self._text(result.get("message") or ""))
        span.end()

    def step_finished(self, step: Step, result: Entry) -> None:
        if step.for_each is not None:
            # A step over rows ends with the run: its summary is in the answer.
            self._step(step)
            return
        span = self._step(step)
        with self._lock:
            self._steps.pop(step.num, None)
        _close_step(span, result, self._text)

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        return None

    def calls_planned(self, total: int) -> None:
        if self.run is not None:
            self.run.set_attribute("pooler.calls_planned", total)

    def pool_finished(self, answer: Answer) -> None:
        entries = {e.get("num"): e for e in answer.get("steps") or [] if isinstance(e, dict)}
        with self._lock:
            steps, self._steps = self._steps, {}
            calls, self._calls = self._calls, {}
        for span in calls.values():
            span.set_attribute("pooler.status", "unknown")
            span.end()
        for num, span in steps.items():
            _close_step(span, entries.get(num) or {}, self._text)
        self.end(answer)

    def end(self, answer: Answer | None) -> None:
        """The run's span ended with the answer's counts (``None``: the run raised)."""
        run, self.run = self.run, None
        if run is None:
            return
        if answer is None:
            run.set_status(Status(StatusCode.ERROR, "the run stopped before its answer"))
            run.end()
            return
        in_doubt = int(answer.get("calls_in_doubt") or 0)
        failed = int(answer.get("failed") or 0) - in_doubt
        run.set_attributes({"pooler.status": str(answer.get("status")),
                            "pooler.calls": int(answer.get("total") or 0),
                            "pooler.succeeded": int(answer.get("succeeded") or 0), "pooler.failed": failed,
                            "pooler.in_doubt": in_doubt, "pooler.skipped": int(answer.get("skipped") or 0),
                            "pooler.not_run": int(answer.get("not_run") or 0)})
        if answer.get("interrupted"):
            run.set_attribute("pooler.interrupted", self._text(answer["interrupted"]))
        flow = answer.get("flow")
        if isinstance(flow, dict):
            run.set_attributes({f"pooler.flow.{name}": int(count) for name, count in flow.items()})
        if answer.get("result"):
            run.set_status(Status(StatusCode.OK))
        elif failed:
            run.set_status(Status(StatusCode.ERROR, f"{failed} call(s) failed"))
        run.end()


def _set_status(span: Span, status: str, message: str) -> None:
    """completed and skipped are OK, failed an ERROR; in doubt is not known to have failed, so it
    stays unset (with ``pooler.in_doubt``), as does not_run."""
    if status in LANDED:
        span.set_status(Status(StatusCode.OK))
    elif status == CallStatus.FAILED:
        span.set_status(Status(StatusCode.ERROR, message[:300]))


def _close_step(span: Span, entry: Mapping[str, Any], text: Callable[[Any], str]) -> None:
    status = str(entry.get("status") or "unknown")
    span.set_attribute("pooler.status", status)
    rows = entry.get("rows")
    if isinstance(rows, dict):
        for name, count in rows.items():
            if isinstance(count, int):
                span.set_attribute(f"pooler.rows.{name}", count)
    if status == StepStatus.PARTIAL:
        # Some rows landed; an error only when some failed, not when the rest are only in doubt.
        status = CallStatus.FAILED if isinstance(rows, dict) and rows.get("failed") else CallStatus.IN_DOUBT
    _set_status(span, status, text(entry.get("message") or ""))
    span.end()
