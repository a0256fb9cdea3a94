"""A task's report as one self-contained HTML file, made from the journal alone.

The page is rendered by Jinja2 with autoescaping on, so everything the store sent (a table name, a
message, a key) is text in the page, never markup.  Its style and script are inline, and its
Content-Security-Policy allows exactly those two (by their hashes) and nothing else: no request
leaves the page, whatever a message holds.  Every string printed passes the run's redactor too.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pooler.errors import JournalError, UsageError
from pooler.journal.api import CallHistory
from pooler.redact import Redactor
from pooler.report.data import clock, load_report
from pooler.report.flowgraph import PANEL, flow_graph
from pooler.report.timeline import CELL, LANE, layout
from pooler.version import __version__


def _asset(name: str) -> str:
    return (resources.files("pooler.report") / "assets" / name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _duration(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.2f} s"
    return f"{ms // 60_000} min {ms % 60_000 / 1000:.0f} s"


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _environment(redactor: Redactor) -> jinja2.Environment:
    def finalize(value: Any) -> Any:
        # Markup is the page's own style and script; every other string is masked before it is
        # escaped (a secret holding "&" would not be found once escaped).
        if isinstance(value, str) and not isinstance(value, Markup):
            return redactor.text(value)
        return value

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, finalize=finalize,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["n"] = _number
    env.filters["px"] = lambda v: f"{v:.1f}".rstrip("0").rstrip(".")
    return env


def render_report(journal: CallHistory, task_id: str, redactor: Redactor | None = None) -> str:
    """The HTML page of ``task_id``; JournalError when the journal does not hold the task."""
    data = load_report(journal, task_id)
    if data is None:
        raise JournalError(f"no task {task_id} in the journal {journal.where()} - "
                           "'pooler runs' lists the tasks it holds.")
    css, js = _asset("report.css"), _asset("report.js")
    csp = (f"default-src 'none'; style-src {_sha256(css)}; script-src {_sha256(js)}; img-src 'none'; "
           "base-uri 'none'; form-action 'none'")
    order = {num: i for i, num in enumerate(sorted(data.steps))}
    template = _environment(redactor or Redactor()).from_string(_asset("report.html.j2"))
    # The page's own style and script go in as they are; everything else is escaped.
    own = {"css": Markup(css), "js": Markup(js)}  # noqa: S704 - the package's own files
    return template.render(
        r=data, timelines={run.run: layout(run, data.steps) for run in data.runs}, step_index=order,
        flows={run.run: flow_graph(data.flows.get(run.run, [])) for run in data.runs}, panel=PANEL,
        csp=csp, clock=clock, duration=_duration, cell=CELL, lane=LANE, **own,
        version=__version__, generated=time.strftime("%Y-%m-%dT%H:%M:%S"),
        journal=journal.where())


def write_report(journal: CallHistory, task_id: str, path: Path, redactor: Redactor | None = None) -> None:
    """The report written to ``path`` (owner-only when new: it may name what the store holds)."""
    page = render_report(journal, task_id, redactor)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
    except OSError as exc:
        raise UsageError(f"cannot write the report {path}: {exc.strerror} - check that its folder "
                         "exists and can be written") from None
