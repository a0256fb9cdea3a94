"""The one status every call ends with, used by the executor, the journal, the answer and the CLI.

A ``str`` enum: a status compares equal to its word and is written as that word in JSON, in the
journal and in the answer, which keep the wire and file formats as documented.
"""

from __future__ import annotations

from enum import Enum


class CallStatus(str, Enum):
    """completed, failed, skipped (its key already done in this task), not_run, in_doubt (sent,
    answer lost)."""

    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_RUN = "not_run"
    IN_DOUBT = "in_doubt"

    def __str__(self) -> str:
        return self.value


#: Every final status, in the order the answer counts them.
FINAL: tuple[CallStatus, ...] = (CallStatus.COMPLETED, CallStatus.FAILED, CallStatus.IN_DOUBT,
                                 CallStatus.SKIPPED, CallStatus.NOT_RUN)
#: The statuses after which a call's command is known to have been carried out (or skipped as done).
LANDED: tuple[CallStatus, ...] = (CallStatus.COMPLETED, CallStatus.SKIPPED)
