"""``pooler mcp --metrics-file`` and ``--trace``: the server's metrics file, kept for its whole life,
and one trace per tool call (a tool_pool's run under its tool call's span), or the agent's own trace
when the call's ``_meta`` carries its ``traceparent``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pooler.mcp.outcome import Outcome
from pooler.redact import Redactor
from pooler.report.metrics import MetricsReporter
from pooler.run.events import FanOut, Reporter

if TYPE_CHECKING:
    from pooler.report.tracing import Tracing

#: The pool label of the server's metrics: tool_pool's pools have no file of their own.
POOL_LABEL = "mcp"


class ToolWatch:
    """Wraps each tool call in its span and hands its pool's events to the metrics and the trace."""

    def __init__(self, redactor: Redactor, store: str, *, metrics_file: str | None = None,
                 tracing: Tracing | None = None, warn: Callable[[str], None] | None = None) -> None:
        self.redactor = redactor
        self.store = store
        self.tracing = tracing
        self.metrics = None if metrics_file is None else MetricsReporter(
            Path(metrics_file), pool=POOL_LABEL, store=store, warn=warn, server=True)
        if self.metrics is not None:
            self.metrics.start()

    def call(self, name: str, run: Callable[[Reporter | None], Outcome],
             reporter: Reporter | None, traceparent: str | None = None) -> Outcome:
        """``run(reporter)`` inside the tool call's span, with the pool's events also told to the
        metrics and the trace; the span joins the agent's trace when its request carried a
        ``traceparent`` in ``_meta``."""
        listeners: list[Any] = [] if reporter is None else [reporter]
        if self.metrics is not None:
            listeners.append(self.metrics)
        if self.tracing is None:
            return run(FanOut(listeners) if listeners else None)
        from pooler.report.tracing import TraceReporter  # noqa: PLC0415 - only --trace loads OpenTelemetry

        joined = None
        if traceparent:
            from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
                TraceContextTextMapPropagator,
            )
            joined = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
        span = self.tracing.tracer.start_span(f"mcp {name}", context=joined, attributes={
            "pooler.mcp.tool": name, "pooler.store": self.redactor.text(self.store)})
        before = self.tracing.enter(span)
        try:
            listeners.append(TraceReporter(self.tracing, self.redactor, store=self.store, parent=span))
            outcome = run(FanOut(listeners))
            span.set_attribute("pooler.mcp.is_error", outcome.is_error)
            return outcome
        finally:
            self.tracing.enter(before)
            span.end()

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.tracing is not None:
            self.tracing.close()
