"""The answer's tables on disk: ``<out>/tables/<prefix>.<table>.jsonl`` and ``into`` job files.

Table, unit and command names come from the store or the pool, so every name is made safe before
it becomes part of a file name: nothing a store answers can write outside ``out``.  Files are
created owner-only, since they hold the store's data.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from pooler import strictjson
from pooler.client.answer_scan import TableRows
from pooler.client.arguments import check_into
from pooler.errors import InputError
from pooler.redact import Redactor
from pooler.run.jobfile import JobLedger
from pooler.run.outdir import check_real, folder, safe_name

__all__ = ["HEAD_CHARS", "HEAD_ROWS", "TableWriter", "safe_name"]

HEAD_ROWS = 3
HEAD_CHARS = 300
_TABLES = "tables"
_BUFFER = 1024 * 1024
_ENCODE = strictjson.encoder(ensure_ascii=False, separators=(",", ":"))
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: Locks of the files being written, shared by every writer of the process: the MCP server's
#: tool_run and tool_pool each have a writer and may append to one job at the same time.
_FILE_LOCKS: dict[Path, threading.Lock] = {}
_FILE_GUARD = threading.Lock()
Mask = Callable[[Any], Any] | None


class RowsTooDeepError(InputError):
    """A table's rows are nested too deep to mask or write: what the store answered is unread."""


class TableWriter:
    """Writes the tables of answers under ``out`` and appends them to ``into`` jobs.

    One writer serves a whole run and may be shared by threads: writes to one file are serialized
    (across writers too).  Job files are appended through a ``JobLedger``, so each call's rows
    land in a job once and whole even when a run is killed halfway through writing them.
    """

    def __init__(self, out: Path) -> None:
        self.out = Path(out).absolute()
        self.tables_dir = self.out / _TABLES
        self._jobs = JobLedger()

    def clear_step_tables(self) -> None:
        """Remove ``<out>/tables/step*.jsonl``: a new pool run replaces the step tables."""
        with folder(self.out, (_TABLES,), create=False) as fd:
            if fd is None:
                return
            for name in os.listdir(fd):  # noqa: PTH208 - the folder's descriptor, entered without a link
                if not fnmatch.fnmatchcase(name, "step*.jsonl"):
                    continue
                try:
                    if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                        os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    pass

    def path_for(self, prefix: str, table: str) -> Path:
        """Where ``write`` puts ``table`` of a call written under ``prefix``."""
        path = self._inside(self.tables_dir / f"{safe_name(prefix)}.{safe_name(table)}.jsonl")
        check_real(self.out, path)
        return path

    def job_path(self, into: str, table: str) -> Path:
        """The job file ``<out>/<into>.<table>.jsonl``."""
        return self._inside(self.out / f"{safe_name(into)}.{safe_name(table)}.jsonl")

    def write(self, prefix: str, tables: Mapping[str, Any], into: str | None = None,
              append: bool = False, redactor: Redactor | None = None, *,
              call: str | None = None) -> dict[str, dict[str, Any]]:
        """Write every table of an answer; the answer's ``tables`` object comes back.

        Each table's file is overwritten (appended to with ``append``: the calls of one step over
        rows share its file); ``rows`` and ``head`` describe what this call wrote.  With ``into``
        the rows are appended to the job's file too, and ``job_rows`` is what it holds now; a
        ``call`` whose rows a job already holds (the same call sent again) is not appended twice.
        A table is any iterable of rows (a list, ``TableRows``); rows are read once, one at a
        time.  With ``redactor``, table names and each row are masked just before they are
        written, so no masked copy of a whole table is ever made.
        """
        check_into(into)
        if not tables:
            return {}
        out: dict[str, dict[str, Any]] = {}
        mask = redactor.value if redactor else None
        with folder(self.out, (_TABLES,), create=True) as fd:
            assert fd is not None
            for table, rows in tables.items():
                # A store that answers one row instead of a list still gets its row written.
                seq: Iterable[Any] = rows if isinstance(rows, list | tuple | TableRows) else [rows]
                name = redactor.text(str(table)) if redactor else str(table)
                try:
                    out[name] = self._write_table(fd, prefix, name, seq, into=into, append=append,
                                                   call=call, mask=mask)
                except RecursionError:
                    raise RowsTooDeepError(
                        f"the table {table!r} holds rows nested too deep to read") from None
                except OSError as exc:
                    raise InputError(f"cannot write the table {table!r} under {self.out}: "
                                     f"{exc.strerror or exc} - check --out.") from None
        return out

    def _write_table(self, fd: int, prefix: str, table: str, rows: Iterable[Any], *, into: str | None,
                     append: bool, call: str | None, mask: Mask) -> dict[str, Any]:
        path = self.path_for(prefix, table)
        job = self.job_path(into, table) if into is not None else None
        with self._lock(path):
            if job is None:
                with _open(path, append, fd) as fh:
                    count, head = _write_rows(rows, mask, fh)
                return {"rows": count, "file": str(path), "head": head}
            with self._lock(job):
                held, fresh = self._jobs.begin(job, call)
                if not fresh:
                    with _open(path, append, fd) as fh:
                        count, head = _write_rows(rows, mask, fh)
                    return {"rows": count, "file": str(path), "head": head, "job": str(job), "job_rows": held}
                try:
                    with _open(path, append, fd) as fh, _open(job, True) as jh:
                        count, head = _write_rows(rows, mask, fh, jh)
                except BaseException:
                    self._jobs.undo(job)
                    raise
                return {"rows": count, "file": str(path), "head": head,
                        "job": str(job), "job_rows": self._jobs.end(job, call, count)}

    @staticmethod
    def _lock(path: Path) -> threading.Lock:
        with _FILE_GUARD:
            return _FILE_LOCKS.setdefault(path, threading.Lock())

    def _inside(self, path: Path) -> Path:
        if path.parent not in (self.out, self.tables_dir) or path.name in ("", ".", ".."):
            raise InputError(f"{path} is not inside {self.out} - a table name may not lead out of --out.")
        return path


def _open(path: Path, append: bool, dir_fd: int | None = None) -> IO[str]:
    """A buffered text file, owner-only; a symlink in its place is refused rather than followed.

    With ``dir_fd`` the file is opened in that folder (entered without following a link).
    """
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    try:
        fd = os.open(path if dir_fd is None else path.name, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc} - check --out.") from None
    try:
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "w", encoding="utf-8", newline="\n", buffering=_BUFFER)
    except BaseException:
        os.close(fd)
        raise


def _write_rows(rows: Iterable[Any], mask: Mask, *files: IO[str]) -> tuple[int, list[str]]:
    """Every row as one JSON line into each file: the rows written, and the first ones' text, cut."""
    head: list[str] = []
    count = 0
    for row in rows:
        line = _ENCODE(row if mask is None else mask(row))
        if count < HEAD_ROWS:
            head.append(line[:HEAD_CHARS])
        count += 1
        for fh in files:
            fh.write(line)
            fh.write("\n")
    return count, head
