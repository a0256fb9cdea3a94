"""The store's answer read into a ``Reply``: the envelope taken off, and its kind decided.

Every answer that arrived gets its row of ``answer_kinds`` here, by the HTTP status first (401,
403, 429, 5xx) and then by the body; ``client`` gives the kinds of answers that never arrived.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from pooler.client import answer_kinds as kinds
from pooler.client.answer_scan import Body, parse
from pooler.redact import Redactor
from pooler.strictjson import deeper_than, loads

#: A store's text (a refusal as text, an error, an answer's ``message``) keeps this much.
TEXT_LIMIT = 2000
#: tool_run answers up to this size are decoded whole: the table scanner saves memory only on big
#: answers and costs ten times json.loads' CPU time on the small ones every call gets.
WHOLE_BELOW = 64 * 1024
IN_DOUBT = "the call may or may not have been carried out"
#: Statuses whose text is passed on as it is: the envelope's own, and a crash's text (the seed's).
_PLAIN = (200, 500)


@dataclass
class Reply:
    """The store's answer, with the envelope taken off."""

    status: int
    data: dict[str, Any]
    server_ms: int | None
    module_ms: int | None
    trip_ms: int
    sql: Any = None
    sql_ms: Any = None
    #: What the answer proves about the command (``answer_kinds``).
    kind: kinds.Kind = kinds.DONE
    #: Seconds the store asked to wait (``Retry-After``) before the call is sent again.
    retry_after: float | None = None
    _release: Any = field(default=None, repr=False, compare=False)

    def release(self) -> None:
        """Give the memory this answer holds back to the calls in flight (done once it is used)."""
        if self._release is not None:
            self._release()

    @property
    def result(self) -> bool:
        return self.kind is kinds.DONE

    @property
    def message(self) -> str:
        msg = self.data.get("message", "")
        return msg if isinstance(msg, str) else json.dumps(msg, ensure_ascii=False)

    def time(self) -> dict[str, Any]:
        """The answer's ``time``: server, module, trip, and with debug sql and sql_ms."""
        pairs = (("server", self.server_ms), ("module", self.module_ms), ("trip", self.trip_ms),
                 ("sql", self.sql), ("sql_ms", self.sql_ms))
        return {name: value for name, value in pairs if value is not None}


def read_reply(status: int, headers: Mapping[str, str], content: Body, trip: int, *, tables: bool,
               store: str, redactor: Redactor | None = None) -> Reply:
    """The answer with the envelope off, and its kind; anything that is not an envelope is text.

    tool_run's table rows stay in the body (``TableRows``) until they are written; tool_list's
    answer is small and is decoded whole, as its callers print it as it is.  A store's text is
    masked before it is cut (``redactor``), so a secret across the cut leaves no part of itself.
    """
    mask = redactor if redactor is not None else Redactor()
    wait = _retry_after(headers) if status in (429, 503) else None
    decided = kinds.by_status(status, retry_after=wait is not None)
    try:
        doc = parse(content) if tables and len(content) > WHOLE_BELOW else loads(content)
    except RecursionError:
        return _too_deep(status, trip, store, decided)
    except ValueError:
        return _text(status, headers, content, trip, decided or kinds.UNREADABLE, wait=wait, redactor=mask)
    # A body with fewer brackets than the limit cannot be nested deeper: most are never walked.
    if (content.count(b"[") + content.count(b"{") > kinds.MAX_ANSWER_DEPTH
            and deeper_than(doc, kinds.MAX_ANSWER_DEPTH)):
        return _too_deep(status, trip, store, decided)
    if not isinstance(doc, dict) or "ok" not in doc:
        return _text(status, headers, content, trip, decided or kinds.UNREADABLE, wait=wait, redactor=mask)
    if doc["ok"] is True and isinstance(doc.get("data"), dict):
        data = doc["data"]
        message = data.get("message")
        if isinstance(message, str) and len(message) > TEXT_LIMIT:
            # Cut here, once, so the answer, the journal, the log and the report all get the cut text.
            data["message"] = mask.cut(message, TEXT_LIMIT)
        kind = decided or kinds.by_envelope(True, data.get("result"))
        return Reply(status, data, _int_or_none(doc.get("ms")), _int_or_none(doc.get("unit_ms")), trip,
                     doc.get("sql"), doc.get("sql_ms"), kind=kind, retry_after=wait)
    if doc["ok"] is False and isinstance(doc.get("error"), str):
        message = _with_status(mask.cut(doc["error"].strip(), TEXT_LIMIT), status)
        return Reply(status, {"result": False, "message": message}, None, None, trip,
                     kind=decided or kinds.DENIED, retry_after=wait)
    return _text(status, headers, content, trip, decided or kinds.UNREADABLE, wait=wait, redactor=mask)


def _phrase(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _with_status(text: str, status: int) -> str:
    """Text of an answer that is not 200 (nor a crash's 500) says its status: 401, 403, 429..."""
    return text if status in _PLAIN else f"{text} ({_phrase(status)})"


def _text(status: int, headers: Mapping[str, str], content: Body, trip: int, kind: kinds.Kind, *,
          wait: float | None, redactor: Redactor) -> Reply:
    raw = bytes(content[:8 * TEXT_LIMIT])
    text = redactor.cut(raw.decode("utf-8", "replace").strip(), TEXT_LIMIT, was_cut=len(raw) < len(content))
    if not text:
        text = f"the store answered {_phrase(status)} with no text"
        if 300 <= status < 400 and headers.get("Location"):
            text += f": a redirect to {headers['Location']} - use that address for the store"
    else:
        text = _with_status(text, status)
    return Reply(status, {"result": False, "message": text}, None, None, trip, kind=kind, retry_after=wait)


def _too_deep(status: int, trip: int, store: str, decided: kinds.Kind | None) -> Reply:
    text = (f"the store at {store} sent an answer nested more than {kinds.MAX_ANSWER_DEPTH} levels deep,"
            f" more than this client reads; {IN_DOUBT}")
    return Reply(status, {"result": False, "message": text}, None, None, trip, kind=decided or kinds.TOO_DEEP)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` in seconds (a number of seconds, whole or decimal, or an HTTP date), or None."""
    value = (headers.get("Retry-After") or "").strip()
    if not value:
        return None
    # Whole seconds as HTTP writes them, or decimal ones as some stores send (2.0, 0.25).
    whole, dot, part = value.partition(".")
    if whole.isdigit() and (not dot or part.isdigit()):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(value)
