"""``--metrics-file``: a run's metrics in Prometheus' text format, for node_exporter's textfile
collector, kept up to date while the run goes and written whole at its end.

A reporter like the screen's: it counts what the executor tells it and, from a timer thread,
writes the file every ``interval`` seconds (15 by default) and once more when the run ends.  Every
sample carries two labels only, ``pool`` (the pool file's name) and ``store`` (its configured name,
else its host and port): a task id would make a new series every night.

The counters count this run (each run starts them at zero, as a process's counters start at its
start); ``pooler_last_success_timestamp_seconds`` is kept across runs: a run that does not succeed
writes the value the previous file held, so "no success for 26 hours" can be alerted on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pooler.journal.documents import Answer, Entry
from pooler.pool.model import Pool, Step
from pooler.report.promfile import Family, read_value, render, write_atomic
from pooler.run.events import CallEnd
from pooler.statuses import FINAL, CallStatus

#: How often the file is written while a run goes, in seconds.
INTERVAL = 15.0
#: The store's answer time, in seconds: from a quick command to one near the default timeout.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LAST_SUCCESS = "pooler_last_success_timestamp_seconds"
STATUSES = tuple(s.value for s in FINAL)


class MetricsReporter:
    """Counts one run and keeps its metrics file written; use it as a context manager, so the timer
    stops and the last file is written whatever ends the run."""

    def __init__(self, path: Path, *, pool: str, store: str, runner: str | None = None,
                 interval: float = INTERVAL, warn: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.time, server: bool = False) -> None:
        self.path = path
        self.server = server
        self.labels = {"pool": pool, "store": store}
        if runner is not None:
            self.labels["runner"] = runner
        self.interval = interval
        self.warn = warn
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._warned = False
        self._final = False
        self.started: float | None = None
        self.ended: float | None = None
        self.success: bool | None = None
        self.last_success = read_value(path, LAST_SUCCESS) or 0.0
        self.planned = 0
        self.calls = dict.fromkeys(STATUSES, 0)
        self.rows = dict.fromkeys(STATUSES, 0)
        #: Rows the last run's compares found unchanged and did not send.
        self.unchanged = 0
        self.resent = 0
        self.in_doubt = 0
        self.buckets = [0] * len(BUCKETS)
        self.answers = 0
        self.answer_seconds = 0.0
        #: What flow control did (the answer's ``flow``): seconds held back, busy answers, breaker trips.
        self.throttled = 0.0
        self.busy = 0
        self.trips = 0
        self._base: tuple[dict[str, int], dict[str, int], int] = (dict(self.calls), dict(self.rows), 0)

    # The run's events (from the executor's threads)

    def start(self) -> None:
        """The run (or the server) starts: the first file, and the timer."""
        with self._lock:
            if self.started is not None:
                return
            self.started = self.clock()
        self.write()
        self._timer = threading.Thread(target=self._tick, name="pooler-metrics", daemon=True)
        self._timer.start()

    def pool_started(self, pool: Pool, task_id: str, total: int) -> None:
        with self._lock:
            self._base = (dict(self.calls), dict(self.rows), self.in_doubt)
            self.planned = total
        self.start()

    def step_started(self, step: Step, call: int) -> None:
        return None

    def call_ended(self, step: Step, end: CallEnd, result: Entry) -> None:
        trip = result.get("time", {}).get("trip") if isinstance(result.get("time"), dict) else None
        with self._lock:
            if end.attempts > 1 or "sent_again" in result:
                self.resent += 1
            if isinstance(trip, int | float):
                seconds = trip / 1000
                self.answers += 1
                self.answer_seconds += seconds
                for i, edge in enumerate(BUCKETS):
                    if seconds <= edge:
                        self.buckets[i] += 1

    def step_finished(self, step: Step, result: Entry) -> None:
        status = result.get("status")
        if status not in self.calls:
            return
        with self._lock:
            self.calls[status] += 1
            if status == CallStatus.IN_DOUBT:
                self.in_doubt += 1
            rows = result.get("rows")
            if isinstance(result.get("size"), int):
                # A chunk whose rows are not all of its span (a compare left some unsent).
                self.rows[status] += int(result["size"])
            elif isinstance(rows, list) and len(rows) == 2:
                self.rows[status] += int(rows[1]) - int(rows[0]) + 1
            elif result.get("row") is not None:
                self.rows[status] += 1

    def rows_progress(self, step: Step, done: int, total: int | None) -> None:
        return None

    def calls_planned(self, total: int) -> None:
        with self._lock:
            self.planned = total

    def pool_finished(self, answer: Answer) -> None:
        """The answer's counts replace the running ones: it also counts the calls never started.

        A server's file (``server=True``) adds each pool's counts to the earlier ones and ends only
        when the server does.
        """
        calls_base, rows_base, doubt_base = self._base
        with self._lock:
            # A runner of a task with several runners gets the whole task's answer: its file counts
            # its own calls, as they were told, so the runners' files add up to the task.
            if "runner" not in self.labels:
                self._count_answer(answer, calls_base, rows_base, doubt_base)
            # The task's rows its compares left unsent: the plan's, whichever runner made it.
            self.unchanged = int(answer.get("unchanged") or 0)
            now = self.clock()
            if not self.server:
                self.ended = now
            self.success = bool(answer.get("result"))
            if self.success:
                self.last_success = now
        if self.server:
            self.write()
        else:
            self._finish()

    def _count_answer(self, answer: Answer, calls_base: dict[str, int], rows_base: dict[str, int],
                      doubt_base: int) -> None:
        in_doubt = int(answer.get("calls_in_doubt") or 0)
        calls: dict[str, int] = {CallStatus.COMPLETED: int(answer.get("succeeded") or 0),
                                 CallStatus.FAILED: int(answer.get("failed") or 0) - in_doubt,
                                 CallStatus.IN_DOUBT: in_doubt,
                                 CallStatus.SKIPPED: int(answer.get("skipped") or 0),
                                 CallStatus.NOT_RUN: int(answer.get("not_run") or 0)}
        self.calls = {s: calls_base[s] + calls[s] for s in STATUSES}
        self.in_doubt = doubt_base + in_doubt
        self.planned = int(answer.get("total") or self.planned)
        flow = answer.get("flow") or {}
        self.throttled += int(flow.get("throttled_ms") or 0) / 1000
        self.busy += int(flow.get("busy") or 0)
        self.trips += int(flow.get("breaker_trips") or 0)
        rows = dict(rows_base)
        steps: Sequence[Mapping[str, Any]] = answer.get("steps") or []
        for entry in steps:
            counted = entry.get("rows") if isinstance(entry, dict) else None
            if isinstance(counted, dict):
                for status in STATUSES:
                    rows[status] += int(counted.get(status) or 0)
        self.rows = rows

    # The file

    def __enter__(self) -> MetricsReporter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """The last file written, if the run did not end with its answer (one that raised ends here,
        as not successful)."""
        with self._lock:
            done = self.started is None or self._final
            if not done and self.ended is None:
                self.ended = self.clock()
                if self.success is None:
                    self.success = False
        if done:
            self._stop_timer()
            return
        self._finish()

    def _finish(self) -> None:
        self._stop_timer()
        self._final = True
        self.write()

    def _stop_timer(self) -> None:
        self._stop.set()
        timer, self._timer = self._timer, None
        if timer is not None and timer is not threading.current_thread():
            timer.join()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self.write()

    def write(self) -> None:
        """The file as things stand; a failure is told once and the run goes on."""
        with self._lock:
            text = render(self.families())
        try:
            write_atomic(self.path, text)
        except OSError as exc:
            if self.warn is not None and not self._warned:
                self._warned = True
                self.warn(f"pooler: WARNING: --metrics-file {self.path} could not be written "
                          f"({exc.strerror or exc}); the run goes on without it")

    def families(self) -> list[Family]:
        """Every metric as it stands (call with the lock held)."""
        labels = self.labels
        now = self.clock()
        out: list[Family] = []

        def gauge(name: str, text: str, value: float, kind: str = "gauge") -> None:
            fam = Family(name, kind, text)
            fam.add(value, labels)
            out.append(fam)

        gauge("pooler_run_start_timestamp_seconds", "When the last run started, in seconds since the epoch.",
              self.started or 0.0)
        if self.ended is not None:
            gauge("pooler_run_end_timestamp_seconds", "When the last run ended, in seconds since the epoch.",
                  self.ended)
        gauge(LAST_SUCCESS, "When a run last ended with every call done (0: never), in seconds since the "
              "epoch; kept from the previous file by a run that does not succeed.", self.last_success)
        gauge("pooler_run_in_progress", "1 while a run goes, 0 once it has ended.",
              1.0 if self.ended is None else 0.0)
        gauge("pooler_run_success", "1 when the last run ended with every call done, else 0.",
              1.0 if self.success else 0.0)
        end = self.ended if self.ended is not None else now
        gauge("pooler_run_duration_seconds", "How long the last run took (so far, while it goes).",
              max(0.0, end - (self.started or end)))
        gauge("pooler_calls_planned", "The calls the last run planned, rows included.", self.planned)
        calls = Family("pooler_calls_total", "counter",
                       "Calls of the last run, by the status each ended with.")
        rows = Family("pooler_rows_total", "counter",
                      "Rows of steps over rows in the last run, by the status of the call that carried them.")
        for status in STATUSES:
            calls.add(self.calls[status], {**labels, "status": status})
            rows.add(self.rows[status], {**labels, "status": status})
        out += [calls, rows]
        gauge("pooler_rows_unchanged", "Rows of the last run that its steps' compare found unchanged in the "
              "store, and did not send.", self.unchanged)
        gauge("pooler_calls_in_doubt", "Calls of the last run whose answer was lost: they may or may not "
              "have been carried out.", self.in_doubt)
        resent = Family("pooler_calls_resent_total", "counter", "Calls of the last run that were sent again "
                        "(tried more than once, or sending a call an earlier run left in doubt).")
        resent.add(self.resent, labels)
        out.append(resent)
        gauge("pooler_calls_throttled_seconds", "Seconds the last run's calls waited before they started: "
              "rate limits, the pauses a busy store asked for, an adaptive width's pace.", self.throttled)
        for name, text, count in (
                ("pooler_store_busy_answers_total",
                 "Busy answers (429, 503 with Retry-After) the last run met.", self.busy),
                ("pooler_breaker_trips_total", ("Times the last run's breaker opened: requests in a row that "
                                          "could not reach the store."), self.trips)):
            family = Family(name, "counter", text)
            family.add(count, labels)
            out.append(family)
        hist = Family("pooler_store_answer_seconds", "histogram",
                      "How long the store took to answer each call of the last run, in seconds.")
        for edge, count in zip(BUCKETS, self.buckets, strict=True):
            hist.add(count, {**labels, "le": _edge(edge)}, "_bucket")
        hist.add(self.answers, {**labels, "le": "+Inf"}, "_bucket")
        hist.add(self.answer_seconds, labels, "_sum")
        hist.add(self.answers, labels, "_count")
        out.append(hist)
        return out


def _edge(value: float) -> str:
    return repr(value)
