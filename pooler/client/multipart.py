"""The multipart/form-data body of a call with attachments, read from disk as it is sent."""

from __future__ import annotations

import mimetypes
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from pooler.errors import InputError


class MultipartBody:
    """A multipart/form-data body read from disk as it is sent, with a known length."""

    def __init__(self, request_json: bytes, files: Sequence[tuple[IO[bytes], int, Path]]) -> None:
        # 32 random hex digits, as uuid4 would give, without uuid's start-up (it loads platform).
        self.boundary = secrets.token_hex(16)
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
