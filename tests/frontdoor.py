"""A TLS front door on 127.0.0.1 before a store, to hold a runner's request where a real network
would: before the connection is ready (its TLS handshake), or after the request was written and
before the store reads it.  Every connection is passed on to the store; what the clients wrote is
kept, to read the headers they sent.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REQUIRE = "POOLER_REQUIRE_OPENSSL"


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by the openssl program: a client that trusts
    the certificate (a CA bundle of it) checks the store's address against it and passes."""
    if shutil.which("openssl") is None:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"the openssl program is not installed; {REQUIRE}=1 asks for these tests to run")
        pytest.skip("the openssl program is not installed (it makes the front door's certificate)")
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


class FrontDoor:
    """``https://127.0.0.1:PORT`` passed on to the store at ``target``."""

    def __init__(self, target: str, folder: Path) -> None:
        cert, key = self_signed(folder)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.listener.getsockname()[1]}"
        #: Set when the connection or request asked for is held; ``release`` lets it go on.
        self.holding = threading.Event()
        self.release = threading.Event()
        self._hold: str | None = None
        self._lock = threading.Lock()
        self._written: list[bytearray] = []
        threading.Thread(target=self._accept, daemon=True, name="front door").start()

    def hold(self, what: str) -> None:
        """Hold the next connection: before its ``handshake``, or its first ``request`` once written."""
        self.holding.clear()
        self.release.clear()
        self._hold = what

    def leases(self) -> list[str]:
        """The Pooler-Lease header of every request the clients wrote, connection by connection."""
        with self._lock:
            written = [bytes(b) for b in self._written]
        return [m.decode() for w in written for m in re.findall(rb"(?im)^Pooler-Lease: ([^\r\n]+)", w)]

    def close(self) -> None:
        self.release.set()
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                what, self._hold = self._hold, None
            threading.Thread(target=self._serve, args=(raw, what), daemon=True).start()

    def _serve(self, raw: socket.socket, what: str | None) -> None:
        if what == "handshake":
            self.holding.set()
            self.release.wait()
        try:
            client = self.context.wrap_socket(raw, server_side=True)
            store = socket.create_connection(self.target)
        except OSError:
            raw.close()
            return
        written = bytearray()
        with self._lock:
            self._written.append(written)
        threading.Thread(target=pipe, args=(store, client, None), daemon=True).start()
        if what == "request":
            head = _whole_request(client, written)
            self.holding.set()
            self.release.wait()
            try:
                store.sendall(head)
            except OSError:
                return
        pipe(client, store, written)


def _whole_request(client: ssl.SSLSocket, written: bytearray) -> bytes:
    """Read the first request of the connection whole (its head and a Content-Length body)."""
    while b"\r\n\r\n" not in written:
        chunk = client.recv(65536)
        if not chunk:
            return bytes(written)
        written += chunk
    head, _, body = bytes(written).partition(b"\r\n\r\n")
    found = re.search(rb"(?im)^Content-Length: *(\d+)", head)
    need = int(found.group(1)) if found else 0
    while len(body) < need:
        chunk = client.recv(65536)
        if not chunk:
            break
        written += chunk
        body += chunk
    return bytes(written)


def pipe(source: socket.socket, sink: socket.socket, kept: bytearray | None) -> None:
    try:
        while chunk := source.recv(65536):
            if kept is not None:
                kept += chunk
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
