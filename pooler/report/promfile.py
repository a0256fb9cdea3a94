"""The Prometheus text exposition format, written whole or not at all, for node_exporter's textfile
collector.

node_exporter reads every ``*.prom`` file of its folder at each scrape; a file half written would
be read half.  So the text goes to a temporary file in the same folder (its name does not end in
``.prom``, so the collector never reads it), is synced to disk, and is renamed over the old one:
a scrape, a crash or a kill at any moment finds the previous file or the new one, each whole.

A new file is owner-only (0600), as every file pooler writes; a file that is already there keeps
its mode, so an operator who let node_exporter's user read it (``chmod 0640`` and a shared group)
keeps that across runs.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pooler.errors import UsageError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
Labels = Mapping[str, str]


@dataclass
class Family:
    """One metric: its name, type and help text, and its samples (suffix, labels, value).

    In the text format 0.0.4 (node_exporter's, promtool's) ``# HELP`` and ``# TYPE`` name a counter
    exactly as its samples are named, ``_total`` included: a family named without it (the
    OpenMetrics way) leaves its ``_total`` samples with no TYPE nor HELP, so they arrive untyped.
    A histogram's samples add their ``_bucket``, ``_sum`` and ``_count`` to its name.
    """

    name: str
    kind: str  # gauge, counter, histogram
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"the counter {self.name} is named as its samples are: {self.name}_total")

    def add(self, value: float, labels: Labels, suffix: str = "") -> None:
        if suffix and self.kind != "histogram":
            raise ValueError(f"only a histogram's samples add to its name, not {self.name}{suffix}")
        self.samples.append((suffix, labels, value))


def render(families: Sequence[Family]) -> str:
    """The families as exposition text: ``# HELP``, ``# TYPE`` and one line per sample."""
    lines: list[str] = []
    for fam in families:
        lines.append(f"# HELP {fam.name} {_escape_help(fam.help)}")
        lines.append(f"# TYPE {fam.name} {fam.kind}")
        for suffix, labels, value in fam.samples:
            lines.append(f"{fam.name}{suffix}{_labels(labels)} {_number(value)}")
    return "\n".join(lines) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape_value(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


def _escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def check_target(path: Path, flag: str = "--metrics-file") -> None:
    """Refuse, before anything is sent, a metrics file that could not be written where it goes."""
    folder = path.absolute().parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist - create it (node_exporter's "
                         "--collector.textfile.directory), or name a file in a folder that exists")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the folder {folder} cannot be written by this user - the file is "
                         "written beside itself and renamed into place, so its folder must be writable")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: that is a folder - name the file, like {path / 'pooler.prom'}")
    if path.suffix != ".prom":
        raise UsageError(f"{flag} {path}: node_exporter's textfile collector reads only files ending in "
                         f".prom - name it like {path.with_suffix('.prom').name}")


def write_atomic(path: Path, text: str) -> None:
    """``text`` in ``path``, replaced in one rename; raises ``OSError``."""
    folder = path.absolute().parent
    mode = 0o600
    try:
        found = os.lstat(path)
        if stat.S_ISREG(found.st_mode):
            mode = stat.S_IMODE(found.st_mode)
    except FileNotFoundError:
        pass
    temp = folder / f".{path.name}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)
    try:
        try:
            os.fchmod(fd, mode)
            data = text.encode()
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        temp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    # The rename itself is on disk only once the folder is.
    with contextlib.suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_value(path: Path, name: str) -> float | None:
    """The value of the first sample of ``name`` in an earlier file, or None (no file, no sample)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.search(rf"^{re.escape(name)}(?:\{{[^\n]*\}})?[ \t]+(\S+)", text, re.MULTILINE)
    if found is None:
        return None
    try:
        value = float(found.group(1))
    except ValueError:
        return None
    return value if math.isfinite(value) else None
