"""The tool_run client: contract §1 over one keep-alive urllib3 connection pool.

A refusal of any kind (the engine's, the command's, a 401, an answer that is not JSON) comes back
as a ``Reply`` with ``result`` false.  Only transport failures raise, as ``StoreError`` with
``sent=False`` when the request surely never reached the store and ``sent=True`` when its fate is
unknown.

urllib3, not requests: the client calls one store with settings fixed when it is made, so requests'
per-call machinery (a prepared request copied, hooks, adapters, a Response object, the environment
read again) bought nothing and was a third of a call's CPU time in the client.  What requests did
that pooler relies on is done here and in ``route``: the environment's proxy and CA bundle, certifi's
certificates, the same headers (Accept-Encoding and keep-alive among them), redirects not followed.

One pool is shared by every thread and holds ``pool_size`` connections.  A pool per thread was
measured against it (1,000 CmdEcho calls over 1, 8 and 16 threads against the reference store) and
was no faster, so the simpler shared pool stays.

Stale keep-alive connections: before a pooled connection is reused, urllib3 checks whether the
store has closed it (``is_connection_dropped``) and opens a fresh one if so, so an idle connection
the store dropped is never written to.  A reset or close after the request went out cannot be told
apart from a store that took the call and died, so it is always ``sent=True`` (in doubt); urllib3's
retries are off, so nothing is ever sent twice behind the caller's back.
"""

from __future__ import annotations

import json
import os
import re
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast
from urllib.parse import quote, urlsplit, urlunsplit

from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    PoolError,
    ProtocolError,
    ProxyError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.response import BaseHTTPResponse
from urllib3.util import Retry, Timeout

from pooler.client import answer_kinds as kinds
from pooler.client.answer_budget import AnswerBudget, Hold
from pooler.client.deadline import Watch, Watchdog
from pooler.client.multipart import MultipartBody
from pooler.client.reply import IN_DOUBT, TEXT_LIMIT, WHOLE_BELOW, Reply, read_reply
from pooler.client.route import accept_encoding, open_route
from pooler.client.sendgate import armed, held
from pooler.client.transport import connect_failure, is_timeout, tls_reason
from pooler.errors import InputError, StoreError, UsageError
from pooler.pool.rows import open_file
from pooler.redact import Redactor
from pooler.version import __version__

__all__ = ["MAX_ANSWER_BYTES", "TEXT_LIMIT", "WHOLE_BELOW", "Attachment", "Reply", "ToolRunClient"]

MB = 1024 * 1024
#: The largest answer the client takes in; a bigger one is refused rather than exhausting memory.
MAX_ANSWER_BYTES = 256 * MB
#: What the answers of all calls in flight hold together (see ``answer_budget``)...
MAX_ANSWERS_IN_FLIGHT = 256 * MB
#: ...each byte counted this many times: reading a big answer (its text, the values decoded from
#: it) takes about four times its size for a while.
READ_COST = 4
#: The longest ``Retry-After`` a call waits for; a store asking for more gets the call failed.
MAX_RETRY_AFTER = 60.0
_IN_DOUBT = IN_DOUBT
# Visible ASCII: what an Idempotency-Key header carries unchanged.  pooler.run.identity makes the header
# (with "%" escaped there), so a header it made goes out as it is.
_KEY_SAFE = "".join(chr(c) for c in range(0x21, 0x7F))
_TOKEN_OK = re.compile(r"[\x21-\x7e]+")
#: Nothing is ever sent twice behind the caller's back, and a redirect is an answer like any other.
_NO_RETRIES = Retry(total=False, redirect=False)


@dataclass
class Attachment:
    """One file of a call: the local file (never sent as a path) and the rest of its entry."""

    path: Path
    entry: dict[str, Any]


def _display_url(url: str) -> str:
    """The store's URL as messages show it: with a trailing slash and never a password."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/") + "/"


class ToolRunClient:
    """tool_run and tool_list against one store, safe to share among ``pool_size`` threads."""

    def __init__(self, store: str, token: str | None = None, *, connect_timeout: float = 5.0,
                 read_timeout: float = 60.0, verify: bool = True, pool_size: int = 16,
                 max_answer_bytes: int = MAX_ANSWER_BYTES,
                 max_answers_in_flight: int = MAX_ANSWERS_IN_FLIGHT,
                 redactor: Redactor | None = None, name: str | None = None) -> None:
        parts = urlsplit(store.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(
                f"the store's address {store!r} is not an http(s) URL - write it like http://127.0.0.1:8080"
            )
        self.store = store.strip().rstrip("/")
        #: The store's name from the config file, when it was named.
        self.name = name
        #: Headers that belong to the call the current thread sends (a trace's ``traceparent``),
        #: asked for before each request; None: none.
        self.call_headers: Callable[[], Mapping[str, str]] | None = None
        self._shown = _display_url(self.store)
        self._safe = self._shown.rstrip("/")
        if token is not None:
            token = token.strip() or None
        if token is not None and not _TOKEN_OK.fullmatch(token):
            raise UsageError(
                "the token holds a space, a line break or a character a header cannot carry -"
                " check the token file holds the token alone"
            )
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_answer_bytes = max_answer_bytes
        #: Masks a store's text before it is cut to TEXT_LIMIT, so a secret at the cut never
        #: leaves its first characters behind.
        self.redactor = redactor if redactor is not None else Redactor()
        self.budget = AnswerBudget(max_answers_in_flight)
        self._watchdog = Watchdog()
        # The environment (proxy variables, NO_PROXY, the CA bundle) is read once, here: every call
        # goes to this one store, so the once-read answer is the answer for all of them.
        self._route = open_route(self.store, verify=verify, pool_size=pool_size, shown=self._shown)
        self._targets = {endpoint: self._route.target(endpoint) for endpoint in ("tool_run", "tool_list")}
        self._timeout = Timeout(connect=connect_timeout, read=read_timeout)
        #: Every request's own headers, in the order requests sent them.
        self._headers = {"User-Agent": f"pooler/{__version__}", "Accept-Encoding": accept_encoding(),
                         "Accept": "application/json", "Connection": "keep-alive"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"

    def __repr__(self) -> str:
        return f"ToolRunClient(store={self._shown!r})"

    @property
    def label(self) -> str:
        """What metrics and traces call the store: its configured name, else its host and port
        (never a user, a password or a path)."""
        if self.name:
            return self.name
        parts = urlsplit(self.store)
        return parts.netloc.rsplit("@", 1)[-1] or self._safe

    @property
    def shown_url(self) -> str:
        """The store's URL as messages and reports show it: never with a password."""
        return self._safe

    def __enter__(self) -> ToolRunClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._route.manager.clear()
        self._watchdog.stop()

    @staticmethod
    def encode(unit: str, command: str, params: dict[str, Any] | None = None, *,
               debug: bool = False) -> bytes:
        """The JSON body of a call without attachments; ``InputError`` for a value JSON cannot carry.

        A caller that records a call as sent encodes it first: what cannot be encoded never leaves.
        """
        return _json_bytes({"unit": unit, "command": command, "params": params or {}, "debug": debug})

    def tool_run(self, unit: str, command: str, params: dict[str, Any] | None = None, *,
                 files: Sequence[Attachment] = (), debug: bool = False,
                 idempotency_key: str | None = None, encoded: bytes | None = None,
                 headers: Mapping[str, str] | None = None,
                 before_send: Callable[[], None] | None = None) -> Reply:
        """One tool_run call; attachments go as multipart parts streamed from disk.

        ``encoded`` is the body ``encode`` made of these arguments, when the caller has it already.
        ``headers`` go as they are; ``before_send`` runs just before the first byte (``sendgate``).
        """
        request: dict[str, Any] = {"unit": unit, "command": command, "params": params or {}, "debug": debug}
        extra = dict(headers or {})
        if idempotency_key is not None:
            extra["Idempotency-Key"] = quote(idempotency_key, safe=_KEY_SAFE)
        if not files:
            body = encoded if encoded is not None else _json_bytes(request)
            extra["Content-Type"] = "application/json"
            return self._post("tool_run", body, extra, before_send)
        opened: list[tuple[IO[bytes], int, Path]] = []
        try:
            for att in files:
                opened.append(_open_attachment(att.path))
            request["files"] = [{"part": f"data_{n}", **{k: v for k, v in att.entry.items() if k != "part"}}
                                for n, att in enumerate(files, start=1)]
            stream = MultipartBody(_json_bytes(request), opened)
            extra["Content-Type"] = f"multipart/form-data; boundary={stream.boundary}"
            return self._post("tool_run", stream, extra, before_send)
        finally:
            for fh, _, _ in opened:
                fh.close()

    def tool_list(self, unit: str | None = None) -> Reply:
        """The store's tool declarations (``data["tools"]``), all of them or one unit's."""
        body = json.dumps({} if unit is None else {"unit": unit}).encode()
        return self._post("tool_list", body, {"Content-Type": "application/json"})

    def _post(self, endpoint: str, body: bytes | MultipartBody, headers: dict[str, str],
              before_send: Callable[[], None] | None = None) -> Reply:
        started = time.monotonic()
        sent = self._headers.copy()
        # Stated for a streamed upload too, which urllib3 would otherwise send chunked.
        sent["Content-Length"] = str(len(body))
        sent.update(headers)
        if self.call_headers is not None:
            sent.update(self.call_headers())
        # A stream is read as it is sent: read() is all urllib3 asks of it.
        payload = body if isinstance(body, bytes) else cast(IO[bytes], body)
        failure: StoreError | None = None
        watch = self._watchdog.start(self.read_timeout)
        hold: Hold | None = None
        try:
            try:
                with armed(before_send):
                    resp = self._route.pool.urlopen(
                        "POST", self._targets[endpoint], body=payload, headers=sent, retries=_NO_RETRIES,
                        redirect=False, assert_same_host=False, timeout=self._timeout,
                        preload_content=False, decode_content=False, chunked=False)
            except (HTTPError, OSError) as exc:
                failure = self._send_failure(exc, watch)
            # Raised outside the handler: nothing of the failed request (its token header) is chained.
            if failure is not None:
                raise failure
            try:
                content, hold = self._read_body(resp, watch)
            finally:
                # Read whole, the connection went back to the pool already; otherwise it is closed.
                resp.close()
                resp.release_conn()
        finally:
            self._watchdog.finish(watch)
        # From when the request began, less what its hook held it back (a rate's slot).
        trip = round((time.monotonic() - started - held()) * 1000)
        try:
            reply = read_reply(resp.status, resp.headers, content, trip, tables=endpoint == "tool_run",
                               store=self._shown, redactor=self.redactor)
        except BaseException:
            if hold is not None:
                hold.release()
            raise
        if hold is not None:
            # Given back when the caller is done with the answer, or when the answer is dropped.
            reply._release = weakref.finalize(reply, hold.release)
        return reply

    def _read_body(self, resp: BaseHTTPResponse, watch: Watch) -> tuple[bytearray, Hold | None]:
        """The answer's bytes, and the share of the answers' budget they hold (big answers only)."""
        cap = self.max_answer_bytes
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise self._too_big()
        encoded = resp.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
        # One growing buffer, not a list of chunks joined at the end: a big answer is held once.
        content = bytearray()
        failure: StoreError | None = None
        hold: Hold | None = None
        try:
            if declared.isdigit() and not encoded and int(declared) <= MB:
                # The common answer: small and of known length, read in one go (the chunk
                # generator costs a tenth of a small call's client time).
                content += resp.read(int(declared))
            else:
                hold = self.budget.open()
                for chunk in resp.stream(MB, decode_content=True):
                    if len(content) + len(chunk) > cap:
                        failure = self._too_big()
                        break
                    if not hold.take(len(chunk) * READ_COST, watch.deadline):
                        failure = self._fail(
                            f"sent an answer that did not fit beside the other answers in flight "
                            f"({self.budget.limit / MB:g} MB together) within {self.read_timeout:g} s",
                            sent=True, kind=kinds.TIMEOUT)
                        break
                    content += chunk
        except (HTTPError, OSError) as exc:
            failure = self._lost_answer(exc, watch)
        if failure is None and watch.fired:
            failure = self._lost_answer(TimeoutError(), watch)
        if failure is None and declared.isdigit() and not encoded and len(content) < int(declared):
            failure = self._fail("cut its answer short", sent=True, kind=kinds.CUT_OFF)
        if failure is not None:
            if hold is not None:
                hold.release()
            raise failure
        return content, hold

    def _fail(self, what: str, *, sent: bool, kind: kinds.Kind) -> StoreError:
        if sent:
            return StoreError(f"the store at {self._shown} {what}; {_IN_DOUBT}", store=self._safe, sent=True,
                              kind=kind)
        return StoreError(f"cannot reach the store at {self._shown}: {what}", store=self._safe, sent=False,
                          kind=kind)

    def _too_big(self) -> StoreError:
        return self._fail(f"sent an answer over {self.max_answer_bytes / MB:g} MB, more than this client"
                          " takes in (ask for fewer rows, or raise max_answer_bytes)", sent=True,
                          kind=kinds.TOO_BIG)

    def _lost_answer(self, exc: BaseException, watch: Watch) -> StoreError:
        if watch.fired or is_timeout(exc):
            return self._fail(f"did not finish its answer within {self.read_timeout:g} s", sent=True,
                              kind=kinds.TIMEOUT)
        return self._fail("cut its answer short", sent=True, kind=kinds.CUT_OFF)

    def _send_failure(self, exc: HTTPError | OSError, watch: Watch) -> StoreError:
        """A failure of the request: before it went out (sent=False) or after (in doubt)."""
        # NewConnectionError is a ConnectTimeoutError too, for urllib3's own history: not a timeout.
        if isinstance(exc, ConnectTimeoutError) and not isinstance(exc, NewConnectionError):
            return self._fail(f"no connection within {self.connect_timeout:g} s", sent=False,
                              kind=kinds.NOT_SENT)
        if isinstance(exc, SSLError):
            return self._fail(f"TLS failed ({tls_reason(exc)})", sent=False, kind=kinds.NOT_SENT)
        if isinstance(exc, ProxyError):
            return self._fail("the proxy refused the connection", sent=False, kind=kinds.NOT_SENT)
        if watch.fired or isinstance(exc, ReadTimeoutError):
            return self._fail(f"did not answer within {self.read_timeout:g} s", sent=True,
                              kind=kinds.TIMEOUT)
        if isinstance(exc, ProtocolError | NewConnectionError | PoolError | OSError):
            not_sent = connect_failure(exc, urlsplit(self.store).hostname or "")
            if not_sent is not None:
                return self._fail(not_sent, sent=False, kind=kinds.NOT_SENT)
            return self._fail("closed the connection before answering", sent=True, kind=kinds.RESET)
        return self._fail(f"failed while answering ({type(exc).__name__})", sent=True, kind=kinds.RESET)


def _json_bytes(request: dict[str, Any]) -> bytes:
    try:
        return json.dumps(request, ensure_ascii=False, allow_nan=False).encode()
    except ValueError:
        what = ("a number JSON cannot carry (NaN, Infinity, or one too big for a double like 1e999) - "
                "write it as a finite number, or as text in quotes")
    except (TypeError, RecursionError) as exc:
        what = (f"a value JSON cannot carry ({exc}) - write dates and times as quoted strings, and "
                "numbers as finite numbers")
    raise InputError(f"the call to {request['unit']}\\{request['command']} holds {what}")


def _open_attachment(path: Path) -> tuple[IO[bytes], int, Path]:
    fh = open_file(path)
    return fh, os.fstat(fh.fileno()).st_size, path
