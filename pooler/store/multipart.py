"""A streaming reader of ``multipart/form-data``: parts are read from the socket as they arrive.

Streaming is what lets an attachment go to disk while it is still coming, without holding the
whole body in memory.
"""

from __future__ import annotations

from email.message import Message
from email.utils import collapse_rfc2231_value
from typing import Protocol

CHUNK = 1 << 16
MAX_HEAD = 16 << 10


class Stream(Protocol):
    def read1(self, size: int, /) -> bytes: ...


class MultipartError(ValueError):
    """The body is not the multipart it claims to be, or it is cut off."""


class MultipartReader:
    """The parts of one body of ``length`` bytes, one after another."""

    def __init__(self, stream: Stream, boundary: str, length: int) -> None:
        if not boundary or len(boundary) > 200:
            raise MultipartError("the multipart boundary is missing or too long")
        self._stream = stream
        self._delim = b"\r\n--" + boundary.encode("latin-1")
        # a CRLF in front lets the first boundary line match the delimiter like the others
        self._buf = bytearray(b"\r\n")
        self._left = length
        self._started = False
        self._done = False
        self._current: Part | None = None

    def _fill(self) -> bool:
        if self._left <= 0:
            return False
        # read1: what has arrived, so a file goes to disk while the rest is still coming
        data = self._stream.read1(min(CHUNK, self._left))
        if not data:
            raise MultipartError("the body is cut off: the connection closed before its end")
        self._left -= len(data)
        self._buf += data
        return True

    def read_data(self, size: int) -> bytes:
        """Up to ``size`` bytes of the current part; ``b""`` at its end."""
        while True:
            at = self._buf.find(self._delim)
            # without a delimiter in sight one may be arriving split: keep its length minus one back
            n = min(size, at) if at >= 0 else min(size, len(self._buf) - len(self._delim) + 1)
            if n > 0:
                out = bytes(self._buf[:n])
                del self._buf[:n]
                return out
            if at == 0:
                return b""
            if not self._fill():
                raise MultipartError("the body ends inside a part, with no closing boundary")

    def _skip_data(self) -> None:
        while self.read_data(CHUNK):
            pass

    def next_part(self) -> Part | None:
        """The next part (the one before is skipped to its end), or ``None`` after the last."""
        if self._done:
            return None
        if self._current is not None:
            self._current.closed = True
            self._current = None
        self._skip_data()
        while len(self._buf) < len(self._delim) + 2:
            if not self._fill():
                raise MultipartError("the body ends inside a boundary line")
        del self._buf[: len(self._delim)]
        if self._buf[:2] == b"--":
            self._done = True
            self.drain()
            return None
        head = self._head()
        self._current = Part(self, *_disposition(head))
        return self._current

    def _head(self) -> str:
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buf) > MAX_HEAD:
                raise MultipartError("a part's headers are longer than 16 KB")
            if not self._fill():
                raise MultipartError("the body ends inside a part's headers")
        raw = bytes(self._buf[:end])
        del self._buf[: end + 4]
        # the boundary line may end with spaces (transport padding) before its CRLF
        if not raw.lstrip(b" \t").startswith(b"\r\n") and raw.strip(b" \t"):
            raise MultipartError("a boundary line is followed by something other than a line end")
        return raw.lstrip(b" \t")[2:].decode("utf-8", errors="replace")

    def drain(self) -> None:
        """Read and drop the rest of the body, so the connection can carry the next request."""
        self._buf.clear()
        while self._left > 0:
            data = self._stream.read1(min(CHUNK, self._left))
            if not data:
                break
            self._left -= len(data)
        self._done = True


class Part:
    """One part: its ``name``, its ``filename`` ("" when none) and its bytes through ``read``."""

    def __init__(self, reader: MultipartReader, name: str, filename: str) -> None:
        self._reader = reader
        self.name = name
        self.filename = filename
        self.closed = False

    def read(self, size: int = CHUNK) -> bytes:
        if self.closed:
            return b""
        return self._reader.read_data(size)

    def read_all(self, limit: int) -> bytes:
        out = bytearray()
        while chunk := self.read():
            out += chunk
            if len(out) > limit:
                raise MultipartError(f"the part {self.name} is larger than {limit >> 20} MB")
        return bytes(out)


def _disposition(head: str) -> tuple[str, str]:
    msg = Message()
    for line in head.split("\r\n"):
        key, sep, value = line.partition(":")
        if sep:
            msg[key.strip()] = value.strip()
    if msg.get("content-disposition") is None:
        raise MultipartError("a part has no Content-Disposition header")
    name = msg.get_param("name", header="content-disposition")
    filename = msg.get_param("filename", header="content-disposition")
    if name is None:
        raise MultipartError("a part's Content-Disposition names no part (name=...)")
    return collapse_rfc2231_value(name), collapse_rfc2231_value(filename) if filename is not None else ""


def boundary_of(content_type: str) -> str | None:
    """The boundary of a ``multipart/form-data`` Content-Type, or ``None`` for another type."""
    msg = Message()
    msg["content-type"] = content_type
    if msg.get_content_type() != "multipart/form-data":
        return None
    value = msg.get_param("boundary")
    return collapse_rfc2231_value(value) if value is not None else ""
