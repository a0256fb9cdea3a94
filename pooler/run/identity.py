"""What a call is known by: its step id, its key's chunk form, its Idempotency-Key header, its id in
a job's ledger and the prefix of its step's table files.  Every part of pooler that names a call
(the single-host run, a shared task's runners, the journal's tools) takes the name from here, so
one form never drifts from another.

A call's step id is ``<task>-<num>[-<row>]-<run>``: the task, the step's number, the row (or first
row of a chunk) of a step over rows, and the run of the task that made it.

Two different (task, key, round) triples never share a header: the task and the key are
percent-encoded with ``:`` and ``/`` among the characters encoded, so the one raw ``:`` of a header
separates the task from the key and the one raw ``/`` (after it) the key from its round.  A key
``INV-100/2`` goes out as ``T:INV-100%2F2``; the second round of key ``INV-100`` as ``T:INV-100/2``.

A chunk of a step over rows is known by its key (the template's value for the chunk's first row)
followed by ``#FIRST-LAST``, its rows counted from 0: a chunk of 10 rows sampled with ``--sample``
and the 500-row chunk of a full run that starts at the same row are two calls, not one.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from pooler.pool.model import Step

# Visible ASCII but the characters the header gives a meaning to: "%" (the escape), ":" and "/".
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%:/")


def idempotency_header(task: str, key: str, round_: int = 1) -> str:
    """The ``Idempotency-Key`` of a key's round in a task: visible ASCII, one per triple."""
    head = f"{quote(task, safe=_SAFE)}:{quote(key, safe=_SAFE)}"
    return head if round_ <= 1 else f"{head}/{round_}"


def chunk_key(key: str, first: int, last: int) -> str:
    """The key of the chunk of rows ``first``..``last`` whose first row's key is ``key``."""
    return f"{key}#{first}-{last}"


def step_id(task: str, num: int, row: int | None, run: int) -> str:
    """The step id of call ``num`` (row ``row``, None for a step of one call) in run ``run``."""
    part = "" if row is None else f"-{row}"
    return f"{task}-{num}{part}-{run}"


def run_of_step_id(given: str) -> int | None:
    """The run of the task that made the step id ``given`` (its last part), or None."""
    last = given.rpartition("-")[2]
    return int(last) if last.isdigit() else None


def job_call(task: str, key: str | None, round_: int) -> str | None:
    """A keyed call's identity in a job's ledger: sent again under the same key and round, the
    store answers it with the same rows, which the job already holds.  None for a call without key."""
    if key is None:
        return None
    return json.dumps([task, key, round_], ensure_ascii=False)


def table_prefix(step: Step) -> str:
    """What the table files of ``step`` are named after: ``step<num>.<unit>.<command>``."""
    return f"step{step.num}.{step.unit}.{step.command}"
