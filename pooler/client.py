"""The tool_run client: contract §1 over one keep-alive ``requests.Session``.

A refusal of any kind (the engine's, the command's, a 401, an answer that is not JSON) comes back
as a ``Reply`` with ``result`` false.  Only transport failures raise, as ``StoreError`` with
``sent=False`` when the request surely never reached the store and ``sent=True`` when its fate is
unknown.

One Session is shared by every thread: its connection pool holds ``pool_size`` connections.  A
Session per thread was measured against it (1,000 CmdEcho calls over 1, 8 and 16 threads against
the reference store) and was no faster, so the simpler shared pool stays.

Stale keep-alive connections: before a pooled connection is reused, urllib3 checks whether the
store has closed it (``is_connection_dropped``) and opens a fresh one if so, so an idle connection
the store dropped is never written to.  A reset or close after the request went out cannot be told
apart from a store that took the call and died, so it is always ``sent=True`` (in doubt); urllib3's
retries are off (``max_retries=0``), so nothing is ever sent twice behind the caller's back.
"""

from __future__ import annotations

import json
import mimetypes
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import quote, urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import HTTPError

import pooler
from pooler.envelope import Body, parse
from pooler.errors import InputError, StoreError, UsageError
from pooler.rows import open_file
from pooler.transport import connect_failure, is_timeout, tls_reason

MB = 1024 * 1024
#: The largest answer the client takes in; a bigger one is refused rather than exhausting memory.
MAX_ANSWER_BYTES = 256 * MB
#: A refusal as text keeps this much of the store's text.
TEXT_LIMIT = 2000
#: tool_run answers up to this size are decoded whole: the table scanner saves memory only on big
#: answers and costs ten times json.loads' CPU time on the small ones every call gets.
WHOLE_BELOW = 64 * 1024
_IN_DOUBT = "the call may or may not have been carried out"
# Visible ASCII but "%": what an Idempotency-Key header carries unchanged.
_KEY_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")
_TOKEN_OK = re.compile(r"[\x21-\x7e]+")


@dataclass
class Attachment:
    """One file of a call: the local file (never sent as a path) and the rest of its entry."""

    path: Path
    entry: dict[str, Any]


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

    @property
    def result(self) -> bool:
        return self.data.get("result") is True

    @property
    def message(self) -> str:
        msg = self.data.get("message", "")
        return msg if isinstance(msg, str) else json.dumps(msg, ensure_ascii=False)

    def time(self) -> dict[str, Any]:
        """The answer's ``time``: server, module, trip, and with debug sql and sql_ms."""
        pairs = (("server", self.server_ms), ("module", self.module_ms), ("trip", self.trip_ms),
                 ("sql", self.sql), ("sql_ms", self.sql_ms))
        return {name: value for name, value in pairs if value is not None}


class _Bearer(requests.auth.AuthBase):
    """Sets the token header; also keeps requests from taking credentials out of ~/.netrc."""

    def __init__(self, token: str | None) -> None:
        self._token = token

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        if self._token is not None:
            r.headers["Authorization"] = f"Bearer {self._token}"
        return r

    def __repr__(self) -> str:
        return "_Bearer(***)"


class _OneStoreAdapter(HTTPAdapter):
    """requests' adapter for a client that only ever calls one store.

    requests looks the connection pool up anew for every request (URL parsing, proxy selection,
    pool key); every call here goes to the same store with the same TLS settings, so the pool
    found first is the pool for all of them.
    """

    _found: tuple[tuple[Any, Any], ConnectionPool] | None = None

    def get_connection_with_tls_context(self, request: requests.PreparedRequest, verify: Any,
                                        proxies: Any = None, cert: Any = None) -> ConnectionPool:
        found = self._found
        if found is not None and found[0] == (verify, cert):
            return found[1]
        pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
        self._found = ((verify, cert), pool)
        return pool


class _MultipartBody:
    """A multipart/form-data body read from disk as it is sent, with a known length."""

    def __init__(self, request_json: bytes, files: Sequence[tuple[IO[bytes], int, Path]]) -> None:
        self.boundary = uuid.uuid4().hex
        head = f"--{self.boundary}\r\n".encode()
        self._parts: list[bytes | tuple[IO[bytes], int, Path]] = [
            head + b'Content-Disposition: form-data; name="request"\r\n'
            b"Content-Type: application/json; charset=utf-8\r\n\r\n" + request_json + b"\r\n"
        ]
        for num, (fh, size, path) in enumerate(files, start=1):
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            disposition = f'form-data; name="data_{num}"; filename="{_quote_name(path.name)}"'
            self._parts.append(
                head + f"Content-Disposition: {disposition}\r\nContent-Type: {ctype}\r\n\r\n".encode()
            )
            self._parts.append((fh, size, path))
            self._parts.append(b"\r\n")
        self._parts.append(f"--{self.boundary}--\r\n".encode())
        self._length = sum(p[1] if isinstance(p, tuple) else len(p) for p in self._parts)
        self._index = 0
        self._offset = 0

    def __len__(self) -> int:
        return self._length

    def read(self, size: int = -1) -> bytes:
        want = size if size and size > 0 else self._length
        out = bytearray()
        while len(out) < want and self._index < len(self._parts):
            part = self._parts[self._index]
            if isinstance(part, bytes):
                piece = part[self._offset:self._offset + want - len(out)]
            else:
                fh, total, path = part
                try:
                    piece = fh.read(min(want - len(out), total - self._offset))
                except OSError as exc:
                    # Not an OSError: urllib3 would take it for a dropped connection.
                    raise InputError(f"{path} could not be read while it was sent: {exc.strerror}") from None
                if not piece and total > self._offset:
                    raise InputError(f"{path} got shorter while it was sent - send it once it is whole.")
            out += piece
            self._offset += len(piece)
            size_now = len(part) if isinstance(part, bytes) else part[1]
            if self._offset >= size_now:
                self._index += 1
                self._offset = 0
        return bytes(out)


def _quote_name(name: str) -> str:
    # A quoted-string (RFC 7578): backslash and quote escaped, line breaks (never in a header) as spaces.
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return escaped.replace("\r", " ").replace("\n", " ")


def _display_url(url: str) -> str:
    """The store's URL as messages show it: with a trailing slash and never a password."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/") + "/"


class ToolRunClient:
    """tool_run and tool_list against one store, safe to share among ``pool_size`` threads."""

    def __init__(self, store: str, token: str | None = None, *, connect_timeout: float = 5.0,
                 read_timeout: float = 60.0, verify: bool = True, pool_size: int = 16,
                 max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        parts = urlsplit(store.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(
                f"the store's address {store!r} is not an http(s) URL - write it like http://127.0.0.1:8080"
            )
        self.store = store.strip().rstrip("/")
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
        self._session = requests.Session()
        adapter = _OneStoreAdapter(pool_connections=1, pool_maxsize=pool_size, max_retries=0)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._adapter = adapter
        self._templates: dict[str, requests.PreparedRequest] = {}
        # The environment (proxy variables, NO_PROXY, REQUESTS_CA_BUNDLE) is read once here: requests
        # would read it again for every call, a quarter of its CPU time per call.  Every call goes to
        # this one store, so the once-read answer is the answer for all of them.
        env = self._session.merge_environment_settings(self.store, {}, None, verify, None)
        self._session.proxies = env["proxies"]
        self._session.trust_env = False
        self._verify: bool | str = verify if env["verify"] is None else env["verify"]
        self._session.auth = _Bearer(token)
        self._session.headers.update(
            {"User-Agent": f"pooler/{pooler.__version__}", "Accept": "application/json"}
        )

    def __repr__(self) -> str:
        return f"ToolRunClient(store={self._shown!r})"

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
        self._session.close()

    def tool_run(self, unit: str, command: str, params: dict[str, Any] | None = None, *,
                 files: Sequence[Attachment] = (), debug: bool = False,
                 idempotency_key: str | None = None) -> Reply:
        """One tool_run call; attachments go as multipart parts streamed from disk."""
        request: dict[str, Any] = {"unit": unit, "command": command, "params": params or {}, "debug": debug}
        headers: dict[str, str] = {}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = quote(idempotency_key, safe=_KEY_SAFE)
        if not files:
            body = _json_bytes(request)
            headers["Content-Type"] = "application/json"
            return self._post("tool_run", body, headers)
        opened: list[tuple[IO[bytes], int, Path]] = []
        try:
            for att in files:
                opened.append(_open_attachment(att.path))
            request["files"] = [{"part": f"data_{n}", **{k: v for k, v in att.entry.items() if k != "part"}}
                                for n, att in enumerate(files, start=1)]
            stream = _MultipartBody(_json_bytes(request), opened)
            headers["Content-Type"] = f"multipart/form-data; boundary={stream.boundary}"
            return self._post("tool_run", stream, headers)
        finally:
            for fh, _, _ in opened:
                fh.close()

    def tool_list(self, unit: str | None = None) -> Reply:
        """The store's tool declarations (``data["tools"]``), all of them or one unit's."""
        body = json.dumps({} if unit is None else {"unit": unit}).encode()
        return self._post("tool_list", body, {"Content-Type": "application/json"})

    def _post(self, endpoint: str, body: bytes | _MultipartBody, headers: dict[str, str]) -> Reply:
        started = time.monotonic()
        request = self._prepared(endpoint).copy()
        request.prepare_body(body, None)
        request.headers.update(headers)
        failure: StoreError | None = None
        try:
            # Straight to the adapter: Session.send's hooks, cookie jar and redirect handling are
            # unused here and cost a third of a call's CPU time.
            resp = self._adapter.send(request, stream=True, timeout=(self.connect_timeout, self.read_timeout),
                                      verify=self._verify, proxies=self._session.proxies)
        except requests.RequestException as exc:
            failure = self._send_failure(exc)
        # Raised outside the handler: requests' exception holds the request, token header and all.
        if failure is not None:
            raise failure
        try:
            content = self._read_body(resp)
        finally:
            resp.close()
        trip = round((time.monotonic() - started) * 1000)
        return _reply(resp, content, trip, tables=endpoint == "tool_run")

    def _prepared(self, endpoint: str) -> requests.PreparedRequest:
        """The endpoint's request with the session's headers and the token, prepared once."""
        found = self._templates.get(endpoint)
        if found is None:
            found = self._session.prepare_request(requests.Request("POST", f"{self.store}/{endpoint}"))
            # A body is set per call; the template's own empty one must not leave a length behind.
            found.headers.pop("Content-Length", None)
            self._templates[endpoint] = found
        return found

    def _read_body(self, resp: requests.Response) -> bytearray:
        cap = self.max_answer_bytes
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise self._too_big()
        encoded = resp.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
        # One growing buffer, not a list of chunks joined at the end: a big answer is held once.
        content = bytearray()
        failure: StoreError | None = None
        try:
            if declared.isdigit() and not encoded and int(declared) <= MB:
                # The common answer: small and of known length, read in one go (the chunk
                # generator costs a tenth of a small call's client time).
                content += resp.raw.read(int(declared))
            else:
                for chunk in resp.iter_content(MB):
                    if len(content) + len(chunk) > cap:
                        failure = self._too_big()
                        break
                    content += chunk
        except (requests.RequestException, HTTPError, OSError) as exc:
            failure = self._lost_answer(exc)
        if failure is not None:
            raise failure
        if declared.isdigit() and not encoded and len(content) < int(declared):
            raise self._fail("cut its answer short", sent=True)
        return content

    def _fail(self, what: str, *, sent: bool) -> StoreError:
        if sent:
            return StoreError(f"the store at {self._shown} {what}; {_IN_DOUBT}", store=self._safe, sent=True)
        return StoreError(f"cannot reach the store at {self._shown}: {what}", store=self._safe, sent=False)

    def _too_big(self) -> StoreError:
        return self._fail(f"sent an answer over {self.max_answer_bytes / MB:g} MB, more than this client"
                          " takes in (ask for fewer rows, or raise max_answer_bytes)", sent=True)

    def _lost_answer(self, exc: BaseException) -> StoreError:
        if is_timeout(exc):
            return self._fail(f"did not finish its answer within {self.read_timeout:g} s", sent=True)
        return self._fail("cut its answer short", sent=True)

    def _send_failure(self, exc: requests.RequestException) -> StoreError:
        """A failure of ``session.post``: before the request went out (sent=False) or after."""
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return self._fail(f"no connection within {self.connect_timeout:g} s", sent=False)
        if isinstance(exc, requests.exceptions.SSLError):
            return self._fail(f"TLS failed ({tls_reason(exc)})", sent=False)
        if isinstance(exc, requests.exceptions.ProxyError):
            return self._fail("the proxy refused the connection", sent=False)
        if isinstance(exc, requests.exceptions.ReadTimeout):
            return self._fail(f"did not answer within {self.read_timeout:g} s", sent=True)
        if isinstance(exc, requests.exceptions.ConnectionError):
            not_sent = connect_failure(exc, urlsplit(self.store).hostname or "")
            if not_sent is not None:
                return self._fail(not_sent, sent=False)
            return self._fail("closed the connection before answering", sent=True)
        return self._fail(f"failed while answering ({type(exc).__name__})", sent=True)


def _json_bytes(request: dict[str, Any]) -> bytes:
    try:
        return json.dumps(request, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"the call to {request['unit']}\\{request['command']} holds a value JSON cannot carry ({exc})"
            " - write dates and times as quoted strings, and numbers as finite numbers"
        ) from None


def _open_attachment(path: Path) -> tuple[IO[bytes], int, Path]:
    fh = open_file(path)
    return fh, os.fstat(fh.fileno()).st_size, path


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(value)


def _text_refusal(resp: requests.Response, content: Body, trip: int) -> Reply:
    text = content[:8 * TEXT_LIMIT].decode("utf-8", "replace").strip()[:TEXT_LIMIT]
    if not text:
        text = f"the store answered HTTP {resp.status_code} with no text"
        if 300 <= resp.status_code < 400 and resp.headers.get("Location"):
            text += f": a redirect to {resp.headers['Location']} - use that address for the store"
    return Reply(resp.status_code, {"result": False, "message": text}, None, None, trip)


def _reply(resp: requests.Response, content: Body, trip: int, *, tables: bool) -> Reply:
    """The answer with the envelope off; anything that is not an envelope is a refusal as text.

    tool_run's table rows stay in the body (``TableRows``) until they are written; tool_list's
    answer is small and is decoded whole, as its callers print it as it is.
    """
    try:
        doc = parse(content) if tables and len(content) > WHOLE_BELOW else json.loads(content)
    except (ValueError, RecursionError):
        return _text_refusal(resp, content, trip)
    if not isinstance(doc, dict) or "ok" not in doc:
        return _text_refusal(resp, content, trip)
    if doc["ok"] is True and isinstance(doc.get("data"), dict):
        return Reply(resp.status_code, doc["data"], _int_or_none(doc.get("ms")),
                     _int_or_none(doc.get("unit_ms")), trip, doc.get("sql"), doc.get("sql_ms"))
    if doc["ok"] is False and isinstance(doc.get("error"), str):
        message = doc["error"].strip()[:TEXT_LIMIT]
        return Reply(resp.status_code, {"result": False, "message": message}, None, None, trip)
    return _text_refusal(resp, content, trip)
