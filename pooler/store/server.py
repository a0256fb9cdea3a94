"""The HTTP layer of the store: POST /tool_run and /tool_list over HTTP/1.1 keep-alive.

It knows nothing of tools: it reads the request (JSON, or multipart streamed part by part),
hands the engine the token, the JSON and the file parts, and sends the engine's answer in one
write (headers and body together, TCP_NODELAY set): the standard handler's two writes stall a
keep-alive client about 40 ms per call on delayed ACKs. Injected faults act here, on the wire.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from tempfile import SpooledTemporaryFile
from typing import IO, Any
from urllib.parse import urlsplit

from pooler.store import faults as fx
from pooler.store import fencing
from pooler.store import flow as fl
from pooler.store.answers import JSON_TYPE, TEXT_TYPE
from pooler.store.engine import Answer, Engine
from pooler.store.files import Part
from pooler.store.multipart import MultipartError, MultipartReader, boundary_of

MAX_JSON_BYTES = 64 << 20
#: With --max-file-kb a JSON body is bounded by it too, but never below this: a store that takes
#: only small files still takes ordinary calls.
MIN_JSON_BYTES = 1 << 20
#: Files are streamed to disk, so a multipart body may be larger than a JSON one.
MAX_MULTIPART_BYTES = 1 << 30
ENDPOINTS = ("/tool_run", "/tool_list")
#: The body of a request with an unknown token is read and dropped up to this size, so the client
#: gets its 401 rather than a reset; a larger one is not read at all and the connection is closed.
DROP_UNREAD_BYTES = 64 << 10


def json_limit(max_file_kb: int | None) -> int:
    """The largest JSON body the store reads: 64 MB, or --max-file-kb when that is smaller (1 MB
    at least)."""
    if max_file_kb is None:
        return MAX_JSON_BYTES
    return min(MAX_JSON_BYTES, max(max_file_kb << 10, MIN_JSON_BYTES))


class BadRequestError(Exception):
    """A request the store cannot take; it is answered with ``status`` and closes the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class StoreServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], engine: Engine, faults: fx.FaultPlan | None = None,
                 log: Callable[[str], None] | None = None, *, max_connections: int = 64,
                 idle_timeout: float = 30.0, fences: fencing.Fences | None = None,
                 flow: fl.Flow | None = None) -> None:
        self.engine = engine
        self.faults = faults
        #: With --rate-limit or --crowd-ms: the store's own flow limits.
        self.flow = flow or fl.Flow()
        #: With --fence-leases: the highest fencing epoch seen for each call.
        self.fences = fences
        self.log = log or (lambda text: None)
        self.idle_timeout = idle_timeout
        # One thread a connection, and no more than this many: the next waits to be accepted.
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, StoreHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # Waited for in short turns: a signal that stops the store is handled between them.
        while not self._slots.acquire(timeout=0.5):
            pass
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's full name, which can stall start-up.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def url(self) -> str:
        return f"http://{self.server_name}:{self.server_port}"


class _Spooled:
    """A file part that came before the request part: kept aside until the call is known."""

    def __init__(self, part: Any) -> None:
        self.name: str = part.name
        self.filename: str = part.filename
        self.file: IO[bytes] = SpooledTemporaryFile(max_size=1 << 20)  # noqa: SIM115 - closed by the handler
        while chunk := part.read():
            self.file.write(chunk)
        self.file.seek(0)

    def read(self, size: int = 1 << 16) -> bytes:
        return self.file.read(size)


class StoreHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pooler-store"
    sys_version = ""
    server: StoreServer

    def setup(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A connection that sends nothing for this long (idle keep-alive, a stalled body) is closed.
        self.request.settimeout(self.server.idle_timeout)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Requests are not logged: a busy store would fill its log with them."""

    # -- answering ---------------------------------------------------------------------------

    def _head(self, status: int, content_type: str, length: int, close: bool = False,
              extra: tuple[str, ...] = ()) -> bytes:
        if close:
            self.close_connection = True
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Server: {self.server_version}",
                 f"Content-Type: {content_type}", f"Content-Length: {length}", *extra]
        if status == 405:
            lines.append("Allow: POST")
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _send(self, status: int, content_type: str, body: bytes, close: bool = False) -> None:
        self.wfile.write(self._head(status, content_type, len(body), close) + body)

    def _refuse(self, status: int, message: str) -> None:
        body = json.dumps({"ok": False, "error": message}, ensure_ascii=False).encode("utf-8")
        self._send(status, JSON_TYPE, body, close=True)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The base class's refusals (a bad request line, headers too long) as one line of text."""
        phrase = message or HTTPStatus(code).phrase
        text = f"{code} {phrase} - the store answers POST /tool_run and /tool_list."
        try:
            self._send(code, TEXT_TYPE, text.encode("utf-8"), close=True)
        except OSError:
            self.close_connection = True

    def _not_post(self) -> None:
        self._refuse(405, f"{self.command} is not served - POST JSON to /tool_run or /tool_list.")

    # http.server finds a method's handler by these names
    do_GET = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_post  # noqa: N815

    # -- POST --------------------------------------------------------------------------------

    def do_POST(self) -> None:
        started = time.perf_counter()
        try:
            self._post(started)
        except BadRequestError as exc:
            self._refuse(exc.status, str(exc))
        except (OSError, MultipartError):
            # the client went away, or its body stopped halfway: nobody is left to answer
            self.close_connection = True
        except Exception:  # noqa: BLE001 - a bug must not take the store down or show a traceback
            self.server.log(f"pooler store: {self.path}: {traceback.format_exc()}")
            try:
                self._send(500, TEXT_TYPE, b"The store broke down on this call; its log holds the details.",
                           close=True)
            except OSError:
                self.close_connection = True

    def _post(self, started: float) -> None:
        path = urlsplit(self.path).path
        if path not in ENDPOINTS:
            raise BadRequestError(404, f"No such endpoint: {path} - the store answers POST /tool_run and "
                                       "/tool_list.")
        if self.headers.get("Transfer-Encoding"):
            raise BadRequestError(411, "Send the body with a Content-Length, not in chunks.")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BadRequestError(400, "Content-Length is not a number.") from None
        boundary = boundary_of(self.headers.get("Content-Type", "application/json"))
        limit = (MAX_MULTIPART_BYTES if boundary is not None and path == "/tool_run"
                 else json_limit(self.server.engine.config.max_file_kb))
        if length < 0 or length > limit:
            raise BadRequestError(413, f"The body is larger than {limit >> 20} MB - send fewer rows or files "
                                       "per call.")
        token = self._token()
        if not self.server.engine.knows(token):
            # Before the body: a caller without a token never makes the store hold what it sends.
            if length <= DROP_UNREAD_BYTES:
                self._body(length)
            answer = self.server.engine.unauthorized(token)
            self._send(answer.status, answer.content_type, answer.body, close=True)
            return
        if path == "/tool_list":
            request = _json(self._body(length)) if length else {}
            self._deliver(self.server.engine.tool_list(token, request, started), None)
            return
        if boundary is None:
            self._tool_run(token, _json(self._body(length)), None, None, started)
            return
        reader = MultipartReader(self.rfile, boundary, length)
        spooled: list[_Spooled] = []
        try:
            try:
                request = self._request_part(reader, spooled)
            except BadRequestError:
                # the rest is read before the refusal, or the client may lose it to a reset
                reader.drain()
                raise
            self._tool_run(token, request, reader, _parts(spooled, reader), started)
        finally:
            for item in spooled:
                item.file.close()

    def _tool_run(self, token: str | None, request: dict[str, Any], reader: MultipartReader | None,
                  parts: Iterator[Part] | None, started: float) -> None:
        wait = self.server.flow.admit(request)
        if wait:
            self._busy(request, wait, reader)
            return
        fault = self.server.faults.pick(request) if self.server.faults is not None else None
        if fault == "refuse":
            self.close_connection = True
            return
        if fault == "crash":
            if reader is not None:
                reader.drain()
            self._send(500, TEXT_TYPE, fx.crash_text(request))
            return
        key = (self.headers.get("Idempotency-Key") or "").strip() or None
        if self.server.fences is not None and self._fenced(token, key, reader):
            return
        traceparent = (self.headers.get("traceparent") or "").strip() or None
        with self.server.flow.crowded(request):
            answer = self.server.engine.tool_run(token, request, parts, key, started,
                                                 traceparent=traceparent)
        if reader is not None:
            reader.drain()
        self._deliver(answer, fault)

    def _busy(self, request: dict[str, Any], wait: float, reader: MultipartReader | None) -> None:
        """A call over the rate limit: 429, nothing carried out, the wait as ``Retry-After``."""
        if reader is not None:
            reader.drain()
        after = fl.retry_after(wait)
        limit = self.server.flow.bucket.rate if self.server.flow.bucket is not None else 0
        message = (f"{request.get('unit')}\\{request.get('command')}: over the store's rate limit of "
                   f"{limit:g} calls a second - not carried out; come back in {after} s")
        self.server.log(f"429 {message}")
        body = json.dumps({"ok": False, "error": message}, ensure_ascii=False).encode("utf-8")
        self.wfile.write(self._head(429, JSON_TYPE, len(body), extra=(f"Retry-After: {after}",)) + body)

    def _fenced(self, token: str | None, key: str | None, reader: MultipartReader | None) -> bool:
        """Whether the request was turned away as older than one seen for its call (409)."""
        assert self.server.fences is not None
        try:
            stale = self.server.fences.admit(token, key, self.headers.get(fencing.HEADER))
        except fencing.MalformedLease as exc:
            raise BadRequestError(400, str(exc)) from None
        if stale is None:
            return False
        if reader is not None:
            reader.drain()
        self._send(409, JSON_TYPE, stale)
        return True

    def _deliver(self, answer: Answer, fault: str | None) -> None:
        if fault == "reset":
            self.close_connection = True
        elif fault == "garbage":
            self._send(200, JSON_TYPE, fx.GARBAGE)
        elif fault == "truncate":
            self.wfile.write(self._head(answer.status, answer.content_type, len(answer.body), close=True)
                             + answer.body[: len(answer.body) // 2])
        elif fault == "huge":
            self._send_huge(answer)
        else:
            if fault == "slow" and self.server.faults is not None:
                time.sleep(self.server.faults.slow_ms / 1000)
            self._send(answer.status, answer.content_type, answer.body)

    def _send_huge(self, answer: Answer) -> None:
        # streamed in pieces: the padding is never whole in memory
        start, chunk, end = b'{"padding":"', b"x" * (1 << 20), b'",' + answer.body[1:]
        count = fx.HUGE_BYTES // len(chunk)
        self.wfile.write(self._head(200, JSON_TYPE, len(start) + count * len(chunk) + len(end)) + start)
        for _ in range(count):
            self.wfile.write(chunk)
        self.wfile.write(end)

    # -- reading -----------------------------------------------------------------------------

    def _token(self) -> str | None:
        scheme, _, value = self.headers.get("Authorization", "").strip().partition(" ")
        return (value.strip() or None) if scheme.lower() == "bearer" else None

    def _body(self, length: int) -> bytes:
        body = self.rfile.read(length)
        if len(body) < length:
            raise ConnectionError("the client closed the connection inside the body")
        return body

    def _request_part(self, reader: MultipartReader, spooled: list[_Spooled]) -> dict[str, Any]:
        while (part := reader.next_part()) is not None:
            if part.name == "request":
                return _json(part.read_all(MAX_JSON_BYTES))
            spooled.append(_Spooled(part))
        raise BadRequestError(400, "The multipart body has no part named request - put the call's JSON "
                                   "in it.")


def _parts(spooled: list[_Spooled], reader: MultipartReader) -> Iterator[Part]:
    yield from spooled
    while (part := reader.next_part()) is not None:
        yield part


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _json(body: bytes) -> dict[str, Any]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(400, f"The body is not UTF-8 text (byte {exc.start}) - send JSON in "
                                   "UTF-8.") from None
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise BadRequestError(400, f"The body is not JSON: {exc.msg} at line {exc.lineno} column "
                                   f"{exc.colno} - send one JSON object.") from None
    except (ValueError, RecursionError) as exc:
        raise BadRequestError(400, f"The body is not JSON: {exc} - send one JSON object.") from None
    if not isinstance(doc, dict):
        kind = {list: "a list", str: "a string", bool: "true or false"}.get(type(doc), "a number or null")
        raise BadRequestError(400, f"The body is {kind}, not a JSON object - send "
                              '{"unit": ..., "command": ..., "params": {...}}.')
    return doc
