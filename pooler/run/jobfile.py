"""``into`` job files that hold each call's rows once and whole, whatever stops a run.

Beside each job file is its ledger, ``<out>/.<job file>.calls``: before a call's rows are
appended it gets a line with the job file's length and the call's identity, and after them a line
with the new length.  A ledger whose last line opens an append that never ended is a run stopped
in the middle (a kill, a full disk): the next writer cuts the job file back to that length before
anything else, so the call's rows, sent again, land once and whole.  A call whose append ended is
not appended a second time: a run killed after its rows were written, but before the journal
recorded the call, sends it again and the store answers from its key with the same rows.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pooler.errors import InputError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BUFFER = 1024 * 1024


@dataclass
class _Job:
    """What a job file holds: rows, and its size and mtime when they were counted."""

    rows: int
    size: int
    mtime: int
    done: set[str] = field(default_factory=set)
    #: The length the job file had when the append under way began.
    began: int | None = None


class JobLedger:
    """Appends to job files that are whole or undone; one per ``TableWriter``, used under its locks."""

    def __init__(self) -> None:
        self._jobs: dict[Path, _Job] = {}

    def begin(self, job: Path, call: str | None) -> tuple[int, bool]:
        """The rows ``job`` holds, and whether the call's rows are to be appended to it."""
        state = self._state(job)
        if call is not None and call in state.done:
            return state.rows, False
        state.began = state.size
        _note(job, {"at": state.size, "call": call})
        return state.rows, True

    def end(self, job: Path, call: str | None, added: int) -> int:
        """The append of ``added`` rows ended: the rows the job holds now."""
        state = self._jobs[job]
        st = job.stat()
        _note(job, {"end": st.st_size, "call": call})
        state.rows += added
        state.size, state.mtime, state.began = st.st_size, st.st_mtime_ns, None
        if call is not None:
            state.done.add(call)
        return state.rows

    def undo(self, job: Path) -> None:
        """The append under way failed: cut the job file back to where it began."""
        state = self._jobs.pop(job, None)
        if state is None or state.began is None:
            return
        try:
            _cut(job, state.began)
        except OSError:
            return  # the ledger still holds the open append: the next writer cuts it back
        _note(job, {"cut": state.began})

    def _state(self, job: Path) -> _Job:
        known = self._jobs.get(job)
        try:
            st = job.stat()
        except FileNotFoundError:
            st = None
        if known is not None and st is not None and (st.st_size, st.st_mtime_ns) == (known.size, known.mtime):
            return known
        done, open_at = _read_ledger(job)
        if open_at is not None and st is not None:
            if st.st_size > open_at:
                _cut(job, open_at)
            _note(job, {"cut": open_at})
        rows, size = _count(job)
        st = job.stat() if size else None
        state = _Job(rows, size, st.st_mtime_ns if st else 0, done)
        self._jobs[job] = state
        return state


def ledger_path(job: Path) -> Path:
    return job.with_name(f".{job.name}.calls")


def _open(path: Path, flags: int) -> int:
    try:
        return os.open(path, flags | _NOFOLLOW, 0o600)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc} - check --out.") from None


def _note(job: Path, record: dict[str, Any]) -> None:
    fd = _open(ledger_path(job), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _read_ledger(job: Path) -> tuple[set[str], int | None]:
    """The calls whose append ended, and where an append that never ended began."""
    done: set[str] = set()
    open_at: int | None = None
    try:
        fh: IO[str] = ledger_path(job).open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return done, None
    with fh:
        for line in fh:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut off by a kill: the append it opened never began
            if not isinstance(record, dict):
                continue
            if "at" in record:
                open_at = record["at"] if isinstance(record["at"], int) else None
            elif "end" in record:
                open_at = None
                if isinstance(record.get("call"), str):
                    done.add(record["call"])
            elif "cut" in record:
                open_at = None
    return done, open_at


def _cut(job: Path, size: int) -> None:
    fd = _open(job, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def _count(job: Path) -> tuple[int, int]:
    """The whole rows of ``job`` and its length; a last line cut short (no ledger said where) is cut off."""
    count = 0
    size = 0
    whole = 0
    try:
        with job.open("rb") as fh:
            while block := fh.read(_BUFFER):
                newlines = block.count(b"\n")
                if newlines:
                    count += newlines
                    whole = size + block.rindex(b"\n") + 1
                size += len(block)
    except FileNotFoundError:
        return 0, 0
    if whole < size:
        _cut(job, whole)
    return count, whole
