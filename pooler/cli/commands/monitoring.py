"""``--metrics-file`` and ``--trace``: the reporters that show a run to monitoring, set up before
anything is sent and closed whatever ends the run."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pooler.cli.commands.common import Context
from pooler.errors import UsageError

if TYPE_CHECKING:
    from pooler.client.http import ToolRunClient
    from pooler.report.metrics import MetricsReporter
    from pooler.report.tracing import TraceReporter, Tracing

OTEL_MISSING = ("--trace: OpenTelemetry is not installed - install pooler with its otel extra "
                "(pip install 'pooler[otel]'), or run without --trace")


def add_monitoring_options(parser: argparse.ArgumentParser, *, what: str = "run") -> None:
    group = parser.add_argument_group("monitoring")
    group.add_argument("--metrics-file", metavar="PATH",
                       help=f"write the {what}'s metrics in Prometheus' text format to PATH (a .prom file in "
                            "node_exporter's textfile folder), every 15 s and at the end, atomically")
    group.add_argument("--trace", action="store_true",
                       help="send OpenTelemetry traces (needs pooler[otel]; configured by OTEL_* variables "
                            "such as OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME)")


def start_tracing(args: argparse.Namespace, ctx: Context) -> Tracing | None:
    """The tracer ``--trace`` asks for, or None; refused (exit 2) when it cannot be had."""
    if getattr(args, "metrics_file", None):
        from pooler.report.promfile import check_target  # noqa: PLC0415 - only --metrics-file writes one

        check_target(Path(args.metrics_file))
    if not getattr(args, "trace", False):
        return None
    try:
        from pooler.report.tracing import Tracing  # noqa: PLC0415 - only --trace loads OpenTelemetry
    except ImportError:
        raise UsageError(OTEL_MISSING) from None
    return Tracing(ctx.environ, ctx.note)


class Monitoring:
    """The run's monitoring reporters (none, the metrics file, the trace, or both) for a ``FanOut``."""

    def __init__(self, args: argparse.Namespace, ctx: Context, client: ToolRunClient, pool_file: str,
                 tracing: Tracing | None, *, runner: bool = False) -> None:
        self.reporters: list[Any] = []
        self.metrics: MetricsReporter | None = None
        self.trace: TraceReporter | None = None
        self.tracing = tracing
        self.client = client
        if getattr(args, "metrics_file", None):
            from pooler.report.metrics import MetricsReporter  # noqa: PLC0415

            path = Path(args.metrics_file)
            # Runners of one task each write their own file; on one host their series differ
            # by the file's name.
            self.metrics = MetricsReporter(path, pool=Path(pool_file).name, store=client.label, warn=ctx.note,
                                           runner=path.stem if runner else None)
            self.reporters.append(self.metrics)
        if tracing is not None:
            from pooler.report.tracing import TraceReporter  # noqa: PLC0415

            self.trace = TraceReporter(tracing, ctx.redactor, store=client.label)
            self.reporters.append(self.trace)
            client.call_headers = tracing.headers

    def __enter__(self) -> Monitoring:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.trace is not None:
            self.client.call_headers = None
            self.trace.end(None)
        if self.metrics is not None:
            self.metrics.close()
        if self.tracing is not None:
            with contextlib.suppress(Exception):
                self.tracing.close()
