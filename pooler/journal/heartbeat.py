"""What a runner's lease is on any journal: a local deadline on the monotonic clock (which runs on
while a process is stopped), renewed every third of the lease by a heartbeat thread.  A renewal the
journal refuses (the lease expired and its calls were taken back), a journal out of reach, or a
heartbeat that wakes past the deadline (the process was frozen or starved) loses the lease; the
client checks ``alive`` just before each request leaves.  Each backend says how a lease is
registered, renewed and given up."""

from __future__ import annotations

import threading
import time

from pooler.journal.work import LeaseLost, Seat


class Heartbeat:
    """A runner of ``task`` holding a lease of ``seconds``; ``renew`` and ``give_up`` are the
    backend's."""

    def __init__(self, task: str, seat: Seat) -> None:
        self.task = task
        self.seconds = seat.seconds
        self.id = seat.id
        self.width = seat.width
        seconds = seat.seconds
        # A margin for the time between the check and the request leaving, and for clock rates.
        self.margin = min(1.0, seconds / 5)
        self.lost: str | None = None
        self._deadline = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="pooler-lease", daemon=True)

    def _started(self, began: float) -> None:
        """The lease registered at ``began`` (monotonic): the heartbeat starts."""
        self._deadline = began + self.seconds - self.margin
        self._thread.start()

    def alive(self) -> bool:
        """Whether a request may leave now."""
        return self.lost is None and time.monotonic() < self._deadline

    def check(self) -> None:
        """Raise ``LeaseLost`` unless a request may leave now."""
        if not self.alive():
            raise LeaseLost(self.lost or f"the lease of runner {self.id} on task {self.task} ran out "
                            "before the call could leave")

    def renew(self) -> str | None:
        """The lease renewed in the journal; why it is lost, when it is."""
        raise NotImplementedError

    def give_up(self) -> None:
        """The lease given up in the journal (a journal gone leaves one that simply expires)."""
        raise NotImplementedError

    def _beat(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            began = time.monotonic()
            if began >= self._deadline:
                # Frozen or starved past the lease: it may already have been taken back.
                self.lost = (f"runner {self.id} was not heard from for longer than its lease "
                             f"({self.seconds:g} s): its calls may have been taken back")
            why = self.renew()
            if why is not None:
                self.lost = why
                return
            if self.lost is None:
                self._deadline = began + self.seconds - self.margin

    def close(self) -> None:
        """Stop renewing and give the lease up (its calls are all recorded by now)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.give_up()


#: Why a renewal the journal refused loses the lease.
def taken_back(runner: str) -> str:
    return f"the lease of runner {runner} expired and its calls were taken back by another runner"
