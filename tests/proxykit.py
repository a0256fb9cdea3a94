"""A forward proxy on 127.0.0.1, as a client meets one in an office: a plain HTTP request in absolute
form is passed on to its host, one request a connection; CONNECT opens a tunnel.  What every request
asked the proxy for (its request line, its Proxy-Authorization) is kept.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from urllib.parse import urlsplit

from frontdoor import pipe


class ForwardProxy:
    """``http://127.0.0.1:PORT``, passing each request on to the host it names."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._asked: list[tuple[str, str | None]] = []
        threading.Thread(target=self._accept, daemon=True, name="forward proxy").start()

    def asked(self) -> list[tuple[str, str | None]]:
        """Each request's line and its Proxy-Authorization header (None without one), in order."""
        with self._lock:
            return list(self._asked)

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = bytearray()
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                client.close()
                return
            head += chunk
        first, _, rest = bytes(head).partition(b"\r\n\r\n")
        line, *fields = first.decode("latin-1").split("\r\n")
        auth = next((f.split(":", 1)[1].strip() for f in fields
                     if f.lower().startswith("proxy-authorization:")), None)
        with self._lock:
            self._asked.append((line, auth))
        method, target, version = line.split(" ")
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            parts = urlsplit(target)
            upstream = socket.create_connection((parts.hostname or "", parts.port or 80))
            # The store closes once it answered: the next request comes on a new connection, in
            # absolute form again.
            kept = [f for f in fields if not re.match(r"(?i)(proxy-authorization|connection):", f)]
            forwarded = "\r\n".join([f"{method} {parts.path} {version}", *kept, "Connection: close"])
            upstream.sendall(forwarded.encode("latin-1") + b"\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        threading.Thread(target=pipe, args=(upstream, client, None), daemon=True).start()
        pipe(client, upstream, None)
        with contextlib.suppress(OSError):
            client.close()
