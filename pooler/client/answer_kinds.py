"""Every kind of answer a call can meet, and what it proves about the command: the one table.

Only an answer that proves the command was **not** carried out lets a keyed call be sent again
under a new key round (``<task>:<key>/<round>``), which the store takes for a new call.  Any
answer after which the command may have run is *in doubt*: sent again, if ever, only with the
same Idempotency-Key, so a store that honours keys answers the repeat from its first try.  The
client gives each answer its kind (``classify`` for answers that arrived, ``StoreError.kind`` for
calls whose answer never did); the executor reads the status and the fate from here alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pooler.statuses import CallStatus


class Fate(Enum):
    """What an answer proves about the command."""

    CARRIED_OUT = "carried out"
    NOT_CARRIED_OUT = "not carried out"
    IN_DOUBT = "in doubt"


_STATUS = {Fate.CARRIED_OUT: CallStatus.COMPLETED, Fate.NOT_CARRIED_OUT: CallStatus.FAILED,
           Fate.IN_DOUBT: CallStatus.IN_DOUBT}


@dataclass(frozen=True)
class Kind:
    """One row of the table: the kind's name, the answers it covers, and its fate."""

    name: str
    answers: str
    fate: Fate
    #: Waited for and sent again within the run (bounded by the step's ``retry.attempts``).
    wait: bool = False
    #: The store's own answer came (or no request began): its work on the request was over.  False
    #: when the answer was lost or came from a gateway, and the store may still be carrying it out.
    over: bool = True
    #: The status a call ends with when it differs from its fate's (a busy call is not run).
    ends: str | None = None
    #: How a keyed call is sent again, when it differs from what its fate allows.
    again: str | None = None

    @property
    def status(self) -> str:
        """The status a call that met this kind ends with."""
        return self.ends or _STATUS[self.fate]

    @property
    def proven_not_run(self) -> bool:
        return self.fate is Fate.NOT_CARRIED_OUT


DONE = Kind("done", "the envelope (`ok: true`) with `data.result: true`", Fate.CARRIED_OUT)
REFUSED = Kind("refused", "the envelope (`ok: true`) with `data.result: false`: the engine or the "
               "command refused", Fate.NOT_CARRIED_OUT)
DENIED = Kind("denied", "HTTP 401 or 403 (whatever the body), or `{\"ok\": false, \"error\": ...}`: "
              "the store turned the request away at its door", Fate.NOT_CARRIED_OUT)
# The store turned the call away at its door and kept nothing under its key: it is sent again
# behind the task's pause, under the same key, for as long as the step's ``busy_for``.
BUSY = Kind("busy", "HTTP 429, or HTTP 503 with `Retry-After`: the store asks to come back later",
            Fate.NOT_CARRIED_OUT, wait=True, ends=CallStatus.NOT_RUN,
            again="with the same Idempotency-Key, behind the task's pause, for `busy_for`")
NOT_SENT = Kind("not sent", "no connection: refused, unknown host, TLS failed, connect timeout",
                Fate.NOT_CARRIED_OUT, wait=True)
CRASHED = Kind("crashed", "HTTP 500 (or a 5xx not named here): the store's error text",
               Fate.IN_DOUBT)
GATEWAY = Kind("gateway", "HTTP 502, 504, or 503 without `Retry-After`: a gateway's answer",
               Fate.IN_DOUBT, over=False)
NO_RESULT = Kind("no result", "the envelope whose `data` has no `result` true or false",
                 Fate.IN_DOUBT)
UNREADABLE = Kind("unreadable", "a body that is not JSON (HTML, text, cut JSON), or JSON that is "
                  "not the envelope", Fate.IN_DOUBT)
TOO_DEEP = Kind("too deep", "JSON nested deeper than 100 levels (outside table rows), or rows "
                "too deep to mask", Fate.IN_DOUBT)
TOO_BIG = Kind("too big", "an answer over the client's cap (256 MB)", Fate.IN_DOUBT)
CUT_OFF = Kind("cut off", "an answer shorter than its Content-Length, or broken off while read",
               Fate.IN_DOUBT)
RESET = Kind("reset", "the connection closed after the request left, before any answer",
             Fate.IN_DOUBT, over=False)
TIMEOUT = Kind("timeout", "no whole answer within `--timeout` (a total deadline per call)",
               Fate.IN_DOUBT, over=False)

KINDS = (DONE, REFUSED, DENIED, BUSY, NOT_SENT, CRASHED, GATEWAY, NO_RESULT, UNREADABLE, TOO_DEEP,
         TOO_BIG, CUT_OFF, RESET, TIMEOUT)

#: The deepest nesting the client takes in an answer (the envelope counts as one level).
MAX_ANSWER_DEPTH = 100


def by_status(status: int, *, retry_after: bool) -> Kind | None:
    """The kind an HTTP status decides whatever the body says, or ``None``: the body decides."""
    if status in (401, 403):
        return DENIED
    if status == 429 or (status == 503 and retry_after):
        return BUSY
    if status in (502, 503, 504):
        return GATEWAY
    if status >= 500:
        return CRASHED
    return None


def by_envelope(ok: object, result: object) -> Kind:
    """The kind of a JSON answer shaped like the envelope, by its ``ok`` and ``data.result``."""
    if ok is False:
        return DENIED
    if result is True:
        return DONE
    if result is False:
        return REFUSED
    return NO_RESULT


def table() -> str:
    """The table as docs/semantics.md shows it (kept in step with it by a test)."""
    lines = ["| kind | the answer | what it proves | a keyed call is sent again | the store's work on it |",
             "|---|---|---|---|---|"]
    for kind in KINDS:
        again = (kind.again if kind.again is not None
                 else "under a new key round" if kind.proven_not_run
                 else "never (it was done)" if kind.fate is Fate.CARRIED_OUT
                 else "only with the same Idempotency-Key")
        work = "over" if kind.over else "may go on"
        lines.append(f"| {kind.name} | {kind.answers} | {kind.fate.value} (`{kind.status}`) | {again} "
                     f"| {work} |")
    return "\n".join(lines)
