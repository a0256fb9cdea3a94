"""A pool document checked as ``pooler check`` checks it (``pool.compiler.check_file``, the one
pass check, run and MCP share), its problems placed in the files they are in.

Paths are shown as check shows them when run from the server's folder: relative to it when the file
is under it, so a message names ``pools/data/cut.json`` as ``pooler check pools/x.yaml`` would.
A problem in a file the pool reads (``pool_source``, ``params_source``) is told in that file, and
once more in the pool at the line that names the file, since that is where its author looks.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pooler.errors import Problem
from pooler.lsp.fixes import Fix, fix_of
from pooler.lsp.spans import Span, Spans

if TYPE_CHECKING:
    from pooler.pool.model import Pool


@dataclass(frozen=True)
class Finding:
    """One problem as the editor shows it: where, the message, and the check's own guess as a fix.
    ``told_in`` is set on the pool's copy of a problem that lies in a file the pool reads."""

    span: Span
    message: str
    fix: Fix | None = None
    told_in: tuple[str, Span] | None = None


@dataclass
class Report:
    """A pool document's check: the pool as loaded (None when it could not be read), and the
    findings by the absolute path of the file each is in (the pool's own file always present)."""

    pool: Pool | None
    files: dict[str, list[Finding]] = field(default_factory=dict)
    #: The problems themselves, as ``pooler check --json`` gives them.
    problems: list[Problem] = field(default_factory=list)
    #: The files the pool reads (absolute paths): a change to one is a reason to check it again.
    reads: set[str] = field(default_factory=set)


def absolute(path: str | Path) -> str:
    """``path`` from the root, ``..`` worked out: how files are matched to the editor's documents."""
    return os.path.abspath(path)  # noqa: PTH100 - Path.absolute() keeps "..", Path.resolve() follows links


def display_path(path: str | Path, cwd: Path | None = None) -> str:
    """``path`` as check names it from ``cwd``: relative below it, absolute elsewhere."""
    here = (cwd or Path.cwd()).resolve()
    full = Path(absolute(path))
    try:
        return str(full.relative_to(here))
    except ValueError:
        return str(full)


def check_document(path: str, text: str, tools: list[dict[str, Any]] | None) -> Report:
    """Every problem of the pool at ``path`` whose text is ``text`` (the files it reads are read
    from disk, as check reads them)."""
    # Imported here: the server answers initialize before the pool's checks are loaded (they are
    # loaded on a worker thread meanwhile: server.LATER).
    from pooler.pool.compiler import check_file  # noqa: PLC0415

    shown = display_path(path)
    found = check_file(shown, tools=tools, text=text)
    own = absolute(path)
    report = Report(found.pool, {own: []}, found.problems, _reads(found.pool, text, path))
    spans = {own: Spans(text)}
    for problem in found.problems:
        where = absolute(problem.file) if problem.file else own
        if where not in spans:
            spans[where] = Spans(_read(where))
        span = spans[where].at(problem.line, problem.column)
        fix = fix_of(problem, spans[where].lines)
        report.files.setdefault(where, []).append(Finding(span, problem.message, fix))
        if where != own:
            naming = _naming_span(spans[own], Path(where).name)
            report.files[own].append(Finding(naming, problem.headline(), told_in=(where, span)))
    return report


_PARAMS_SOURCE = re.compile(r"""params_source["']?\s*:\s*["']?([^"',}\s]+)""")


def _reads(pool: Pool | None, text: str, path: str) -> set[str]:
    """The files a pool reads: its ``pool_source``, its steps' ``params_source`` and data files."""
    if pool is None:
        return set()
    folder = Path(path).parent
    found = {absolute(s.source.file) for s in pool.steps
             if s.source is not None and s.source.file != pool.file}
    sources = [text] + [_read(f) for f in found]
    found.update(absolute(folder / name) for source in sources for name in _PARAMS_SOURCE.findall(source))
    found.update(absolute(pool.data_folder() / s.for_each.file) for s in pool.steps
                 if s.for_each is not None and isinstance(s.for_each.file, str))
    return found


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _naming_span(spans: Spans, name: str) -> Span:
    """Where the pool names a file it reads: the first line that holds its name."""
    for row, line in enumerate(spans.lines):
        at = line.find(name)
        if at >= 0 and not line.lstrip().startswith("#"):
            return Span(row, at, row, at + len(name))
    return spans.at(None, None)
