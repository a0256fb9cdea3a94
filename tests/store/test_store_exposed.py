"""The reference store as a server someone might expose: the token is checked before a body is
read, connections (and so threads) are bounded, and an idle connection is closed."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import STORE_TOKEN, Store


def _connect(store: Store, timeout: float = 30) -> socket.socket:
    host, port = store.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def _until_closed(sock: socket.socket) -> bytes:
    """What the store sends until it closes the connection (the socket's timeout bounds the wait)."""
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _threads(store: Store) -> int:
    status = Path(f"/proc/{store.proc.pid}/status").read_text(encoding="ascii")
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def test_a_request_with_an_unknown_token_is_refused_before_its_body_is_read(store: Store) -> None:
    with _connect(store) as sock:
        # 60 MB announced, not one byte of it sent: the answer must not wait for the body.
        sock.sendall(b"POST /tool_run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 60000000\r\nAuthorization: Bearer not-the-token\r\n\r\n")
        out = _until_closed(sock)
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401 ")
    assert b"Connection: close" in head
    assert json.loads(body) == {"ok": False, "error": "ACCESS_DENIED: the token is not known to this store"}


def test_a_json_body_is_bounded_by_max_file_kb_before_it_is_read(store_factory: Any) -> None:
    store = store_factory("--max-file-kb", "2048")
    with _connect(store) as sock:
        # 3 MB announced with a good token, none of it sent: refused at once, nothing held.
        sock.sendall(b"POST /tool_run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 3145728\r\nAuthorization: Bearer %s\r\n\r\n" % STORE_TOKEN.encode())
        out = _until_closed(sock)
    assert out.startswith(b"HTTP/1.1 413 ")
    assert b"The body is larger than 2 MB - send fewer rows or files per call." in out


def test_a_known_token_still_gets_its_answer(store: Store) -> None:
    body = b'{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1}}'
    with _connect(store) as sock:
        sock.sendall(b"POST /tool_run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\nAuthorization: Bearer %s\r\n\r\n"
                     % (len(body), STORE_TOKEN.encode()) + body)
        out = _until_closed(sock)
    assert out.startswith(b"HTTP/1.1 200 ")
    assert json.loads(out.partition(b"\r\n\r\n")[2])["data"]["detail"] == {"n": 1}


@pytest.mark.process
def test_connections_are_bounded_and_an_idle_one_is_closed(store_factory: Any) -> None:
    # A process: its threads are counted in /proc.
    store = store_factory("--max-connections", "3", "--idle-timeout", "1", process=True)
    base = _threads(store)
    socks = [_connect(store) for _ in range(12)]
    most = base
    try:
        # Each connection sends nothing: the store closes it after a second idle, and takes the
        # next from its queue; never more than 3 are served (each by a thread) at once.
        for sock in socks:
            sock.setblocking(False)
        open_ = set(range(len(socks)))
        deadline = time.monotonic() + 120
        seen = base
        while open_ and time.monotonic() < deadline:
            # Counted when seen in two samples running: a thread that has given its slot back
            # to the next connection may still be seen for a moment as it ends.
            now = _threads(store)
            most, seen = max(most, min(seen, now)), now
            for i in list(open_):
                try:
                    if socks[i].recv(1) == b"":
                        open_.discard(i)
                except BlockingIOError:
                    pass
            time.sleep(0.01)
        assert not open_, f"{len(open_)} idle connections were never closed"
    finally:
        for sock in socks:
            sock.close()
    assert most <= base + 3
