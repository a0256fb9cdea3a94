"""The answer's tables on disk: ``<out>/tables/<prefix>.<table>.jsonl`` and ``into`` job files.

Table, unit and command names come from the store or the pool, so every name is made safe before
it becomes part of a file name: nothing a store answers can write outside ``out``.  Files are
created owner-only, since they hold the store's data.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from pooler import strictjson
from pooler.callargs import check_into
from pooler.envelope import TableRows
from pooler.errors import InputError
from pooler.redact import Redactor

HEAD_ROWS = 3
HEAD_CHARS = 300
_MAX_NAME = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_LEADING_DOTS = re.compile(r"^\.+")
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


def safe_name(name: str) -> str:
    """``name`` as one harmless file-name piece: only [A-Za-z0-9_.-], never starting with a dot."""
    text = _LEADING_DOTS.sub("_", _UNSAFE.sub("_", str(name)))[:_MAX_NAME]
    return text or "_"


class TableWriter:
    """Writes the tables of answers under ``out`` and appends them to ``into`` jobs.

    One writer serves a whole run and may be shared by threads: writes to one file are serialized
    (across writers too).  A job's row count is taken from disk and then kept while the file stays
    as this writer left it; once its size or mtime has changed (another writer, another process),
    it is counted again.
    """

    def __init__(self, out: Path) -> None:
        self.out = Path(out).absolute()
        self.tables_dir = self.out / "tables"
        #: A job's rows, with the size and mtime of its file when they were counted.
        self._job_rows: dict[Path, tuple[int, int, int]] = {}

    def clear_step_tables(self) -> None:
        """Remove ``<out>/tables/step*.jsonl``: a new pool run replaces the step tables."""
        if not self.tables_dir.is_dir():
            return
        for path in self.tables_dir.glob("step*.jsonl"):
            if path.is_file() or path.is_symlink():
                path.unlink(missing_ok=True)

    def path_for(self, prefix: str, table: str) -> Path:
        """Where ``write`` puts ``table`` of a call written under ``prefix``."""
        return self._inside(self.tables_dir / f"{safe_name(prefix)}.{safe_name(table)}.jsonl")

    def job_path(self, into: str, table: str) -> Path:
        """The job file ``<out>/<into>.<table>.jsonl``."""
        return self._inside(self.out / f"{safe_name(into)}.{safe_name(table)}.jsonl")

    def write(self, prefix: str, tables: Mapping[str, Any], into: str | None = None,
              append: bool = False, redactor: Redactor | None = None) -> dict[str, dict[str, Any]]:
        """Write every table of an answer; the answer's ``tables`` object comes back.

        Each table's file is overwritten (appended to with ``append``: the calls of one step over
        rows share its file); ``rows`` and ``head`` describe what this call wrote.  With ``into``
        the rows are appended to the job's file too, and ``job_rows`` is what it holds now.
        A table is any iterable of rows (a list, ``TableRows``); rows are read once, one at a
        time.  With ``redactor``, table names and each row are masked just before they are
        written, so no masked copy of a whole table is ever made.
        """
        check_into(into)
        if not tables:
            return {}
        _make_dir(self.out)
        _make_dir(self.tables_dir)
        out: dict[str, dict[str, Any]] = {}
        mask = redactor.value if redactor else None
        for table, rows in tables.items():
            # A store that answers one row instead of a list still gets its row written.
            seq: Iterable[Any] = rows if isinstance(rows, list | tuple | TableRows) else [rows]
            name = redactor.text(str(table)) if redactor else str(table)
            try:
                out[name] = self._write_table(prefix, name, seq, into, append, mask=mask)
            except RecursionError:
                raise RowsTooDeepError(f"the table {table!r} holds rows nested too deep to read") from None
            except OSError as exc:
                raise InputError(
                    f"cannot write the table {table!r} under {self.out}: {exc.strerror or exc} - check --out."
                ) from None
        return out

    def _write_table(self, prefix: str, table: str, rows: Iterable[Any], into: str | None,
                     append: bool, *, mask: Mask) -> dict[str, Any]:
        path = self.path_for(prefix, table)
        job = self.job_path(into, table) if into is not None else None
        with self._lock(path):
            if job is None:
                with _open(path, append) as fh:
                    count, head = _write_rows(rows, mask, fh)
                return {"rows": count, "file": str(path), "head": head}
            with self._lock(job):
                held = self._job_count(job)
                try:
                    with _open(path, append) as fh, _open(job, True) as jh:
                        count, head = _write_rows(rows, mask, fh, jh)
                except BaseException:
                    # The job file may hold part of the rows now; count it again next time.
                    self._job_rows.pop(job, None)
                    raise
                self._remember(job, held + count)
                return {"rows": count, "file": str(path), "head": head,
                        "job": str(job), "job_rows": held + count}

    @staticmethod
    def _lock(path: Path) -> threading.Lock:
        with _FILE_GUARD:
            return _FILE_LOCKS.setdefault(path, threading.Lock())

    def _remember(self, job: Path, count: int) -> None:
        try:
            st = job.stat()
        except OSError:
            self._job_rows.pop(job, None)
            return
        self._job_rows[job] = (count, st.st_size, st.st_mtime_ns)

    def _job_count(self, job: Path) -> int:
        """Rows the job file holds (kept while the file is unchanged); a last line cut short is ended."""
        known = self._job_rows.get(job)
        if known is not None:
            try:
                st = job.stat()
            except OSError:
                st = None
            if st is not None and (st.st_size, st.st_mtime_ns) == known[1:]:
                return known[0]
        count = 0
        last = b"\n"
        try:
            with job.open("rb") as fh:
                while block := fh.read(_BUFFER):
                    count += block.count(b"\n")
                    last = block[-1:]
        except FileNotFoundError:
            pass
        if last != b"\n":
            with _open(job, True) as jh:
                jh.write("\n")
            count += 1
        self._remember(job, count)
        return count

    def _inside(self, path: Path) -> Path:
        if path.parent not in (self.out, self.tables_dir) or path.name in ("", ".", ".."):
            raise InputError(f"{path} is not inside {self.out} - a table name may not lead out of --out.")
        return path


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the folder {path}: {exc.strerror or exc} - check --out.") from None


def _open(path: Path, append: bool) -> IO[str]:
    """A buffered text file, owner-only; a symlink in its place is refused rather than followed."""
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o600)
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
