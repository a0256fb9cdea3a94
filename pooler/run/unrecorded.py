"""The calls a runner sent whose outcome the journal did not take (it failed, or the runner's lease
was lost): each ends in doubt in the run's answer, with what its answer said, as the journal will
tell it once the call is taken back.  Nothing the journal does not hold is reported done, and no
call that left is reported not run."""

from __future__ import annotations

from pooler.errors import JournalError
from pooler.journal.documents import Entry
from pooler.journal.work import WorkRow
from pooler.redact import Redactor
from pooler.run.callplan import Outcome, Prepared
from pooler.run.entries import not_sent
from pooler.statuses import CallStatus

#: How a runner's reason to stop ends when the journal failed under it.
STOPPED = " - this runner stopped sending"


def journal_gone(exc: JournalError) -> str:
    """Why a runner whose journal failed stops (``Unrecorded.tally`` tells what it left)."""
    return f"{exc.message}{STOPPED}"


class Unrecorded:
    """The in-doubt entries of a runner's calls whose outcome was not recorded, by (step, idx)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.entries: dict[tuple[int, int], Entry] = {}
        #: How many of them had their answer (the others were in flight).
        self.answered = 0

    def add(self, row: WorkRow, outcome: Outcome | None, got: Prepared | None = None) -> None:
        """A call sent whose outcome (None: its answer never came) the journal did not take."""
        if outcome is not None:
            told = str(outcome.entry.get("message") or "")
            entry = {**outcome.entry, "status": CallStatus.IN_DOUBT, "result": False,
                     "message": f"{told} The store answered it ({outcome.status}), but the journal could "
                                "not record that: it stays in doubt until the task runs again.".lstrip()}
            self.answered += 1
        else:
            assert got is not None
            lost = ("Sent, and its answer was not recorded (this runner stopped): it may or may not have "
                    "been carried out.")
            entry = dict(not_sent(got.call.head(), CallStatus.IN_DOUBT, got.key, lost,
                                  step_id=got.ids.step_id))
        self.entries[(row.num, row.idx)] = self.redactor.value(entry)

    def tally(self, why: str) -> str:
        """Why the runner stopped, with the calls it sent whose outcome the journal did not take."""
        if not self.entries:
            return f"{why}; every call it sent is recorded." if why.endswith(STOPPED) else why
        count = len(self.entries)
        return (f"{why}; {count} call(s) it sent end in doubt, their outcome not recorded ({self.answered} "
                f"answered, {count - self.answered} in flight): another runner, or this task run again, "
                "takes them back once this runner's lease expires.")
