"""The store's answer read with its table rows left in the body until they are written.

``json.loads`` of a 200,000-row answer builds every row at once, about ten times the body in
memory.  ``parse`` gives the same document, except that each array under ``data.tables.<name>``
is a ``TableRows``: a re-iterable sequence that decodes its rows one at a time from the body.
Every row is decoded once while the answer is read (that finds where the array ends and proves
it is valid JSON), then dropped; the writer decodes it again when it writes it.

The body stays bytes: text is decoded through a sliding window of about ``WINDOW`` bytes, so an
answer with one character outside the BMP does not turn into text four times its size.  Anything
the scanner does not take (not UTF-8, not an object at the top, invalid JSON) is handed to
``json.loads`` whole, so what is accepted or refused never changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from pooler.strictjson import DECODER, loads

#: Bytes of the body decoded to text at a time; a value longer than that widens the window.
WINDOW = 256 * 1024
#: Characters of rows decoded in one call, then handed out one at a time.
BATCH = 64 * 1024
Body = bytes | bytearray
_DECODER = DECODER
#: The decoder's own scanner (C): raw_decode without its wrapper, called once per row.
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_SPACE = re.compile(r"[ \t\n\r]*")
#: A separator inside an array or object, with the whitespace on both sides.
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]}])[ \t\n\r]*")


class _Unknown(Exception):
    """The body is not an envelope this scanner reads: ``json.loads`` takes it instead."""


class _Cursor:
    """Reads JSON values one after another from a UTF-8 body, through a window of decoded text."""

    __slots__ = ("body", "next", "plain", "pos", "text")

    def __init__(self, body: Body, at: int) -> None:
        self.body = body
        self.text = ""
        self.pos = 0
        #: Byte offset of the body where the text of the window ends.
        self.next = at
        #: ``next`` of a window where rows could not be taken in batches.
        self.plain = -1

    def more(self) -> bool:
        """Move the window on: the unread text plus the next piece of the body (False at its end)."""
        body, start = self.body, self.next
        if start >= len(body):
            return False
        rest = len(self.text) - self.pos
        # A value longer than the window doubles it each time, so reading one stays linear.
        end = min(len(body), start + max(WINDOW, 2 * rest))
        # Cut at the start of a character; a longer run of continuation bytes fails in decode.
        for _ in range(3):
            if end < len(body) and end > start + 1 and body[end] & 0xC0 == 0x80:
                end -= 1
        # "surrogatepass" as json.loads decodes bytes, so the same bodies are accepted.
        piece = body[start:end].decode("utf-8", "surrogatepass")
        self.text = self.text[self.pos:] + piece
        self.pos = 0
        self.next = end
        return True

    def peek(self) -> str:
        """The next character after whitespace, or "" at the end of the body."""
        while True:
            match = _SPACE.match(self.text, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def expect(self, allowed: str) -> str:
        """Take the next character, one of ``allowed``."""
        # The common case in one regex match: the separator and the whitespace after it.
        found = _SEPARATOR.match(self.text, self.pos)
        if found and found.end() < len(self.text) and found.group(1) in allowed:
            self.pos = found.end()
            return found.group(1)
        char = self.peek()
        if not char or char not in allowed:
            raise _Unknown
        self.pos += 1
        return char

    def value(self) -> Any:
        """The next JSON value, decoded as ``json.loads`` decodes it."""
        text = self.text
        try:
            value, end = _SCAN(text, self.pos)
        except (StopIteration, json.JSONDecodeError):
            pass
        else:
            if end < len(text):
                self.pos = end
                return value
        return self._value_across()

    def _value_across(self) -> Any:
        """``value`` when the window does not hold it whole (or whitespace comes first)."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                # Maybe only cut by the window's end: with more text it may be whole.
                if self.more():
                    continue
                raise _Unknown from None
            # A value that reaches the window's end may go on (a number: "12" of "125").
            if end < len(self.text) or self.next >= len(self.body):
                self.pos = end
                return value
            self.more()

    def elements(self) -> Iterator[Any]:
        """The values of the array whose "[" was just taken, up to and including its "]"."""
        if self.peek() == "]":
            self.pos += 1
            return
        scan, separator = _SCAN, _SEPARATOR.match
        while True:
            if self.next != self.plain:
                batch = self._batch()
                if batch:
                    yield from batch
                    continue
                # No batch here: one value at a time up to the window's end, then batches again.
                self.plain = self.next
            text, pos = self.text, self.pos
            while True:
                try:
                    value, end = scan(text, pos)
                except (StopIteration, json.JSONDecodeError):
                    break
                found = separator(text, end)
                if found is None or found.end() >= len(text):
                    break
                yield value
                pos = found.end()
                if found.group(1) != ",":
                    self.pos = pos
                    if found.group(1) != "]":
                        raise _Unknown
                    return
            self.pos = pos
            yield self.value()
            if self.expect(",]") == "]":
                return

    def _batch(self) -> list[Any]:
        """The whole rows of the next stretch of the window, decoded in one C call ([] if none).

        Rows that are objects or arrays end in "}," or "],": the stretch is cut after the last
        one and decoded as an array.  A cut inside a row (a nested object, a string) leaves
        brackets or quotes open, so it fails, or stops short of the end, and is never taken.
        """
        text, pos = self.text, self.pos
        cut = min(len(text), pos + BATCH)
        for _ in range(3):
            cut = max(text.rfind("},", pos, cut), text.rfind("],", pos, cut)) + 1
            if cut <= pos:
                return []
            piece = "[" + text[pos:cut] + "]"
            try:
                rows, end = _SCAN(piece, 0)
            except (StopIteration, json.JSONDecodeError):
                continue
            if end == len(piece) and isinstance(rows, list):
                self.pos = cut + 1
                return rows
        return []

    def offset(self) -> int:
        """The byte offset in the body of the current position."""
        rest = self.text[self.pos:]
        size = len(rest) if rest.isascii() else len(rest.encode("utf-8", "surrogatepass"))
        return self.next - size


class TableRows(Sequence[Any]):
    """The rows of one table, decoded from the answer's body one at a time as they are read.

    ``len()`` is known without decoding; iterating decodes each row afresh, so nothing holds the
    whole table.  Indexing walks the rows up to the one asked for.  With a ``mask``, every row
    comes out through it (secrets masked as the row is read).
    """

    __slots__ = ("_at", "_body", "_count", "_mask")

    def __init__(self, body: Body, at: int, count: int,
                 mask: Callable[[Any], Any] | None = None) -> None:
        self._body = body
        self._at = at
        self._count = count
        self._mask = mask

    def masked(self, mask: Callable[[Any], Any]) -> TableRows:
        """The same rows, each passed through ``mask`` (after any mask these rows already have)."""
        inner = self._mask
        return TableRows(self._body, self._at, self._count,
                         mask if inner is None else lambda row: mask(inner(row)))

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Any]:
        cursor = _Cursor(self._body, self._at)
        cursor.expect("[")
        mask = self._mask
        if mask is None:
            yield from cursor.elements()
            return
        for row in cursor.elements():
            yield mask(row)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        at = index + self._count if index < 0 else index
        if not 0 <= at < self._count:
            raise IndexError("table row index out of range")
        for num, row in enumerate(self):
            if num == at:
                return row
        raise IndexError("table row index out of range")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TableRows | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TableRows({self._count} rows)"


class _Scan:
    """The envelope: objects on the path to ``data.tables``, every other value decoded whole."""

    def __init__(self, body: Body, at: int) -> None:
        self.body = body
        self.cursor = _Cursor(body, at)

    def document(self) -> dict[str, Any]:
        if self.cursor.peek() != "{":
            raise _Unknown
        doc = self.members(lambda key: self.data if key == "data" else None)
        if self.cursor.peek():
            raise _Unknown
        return doc

    def members(self, special: Callable[[str], Callable[[], Any] | None]) -> dict[str, Any]:
        """An object whose members ``special`` may read its own way; duplicate keys: the last wins."""
        cursor = self.cursor
        cursor.expect("{")
        out: dict[str, Any] = {}
        if cursor.peek() == "}":
            cursor.pos += 1
            return out
        while True:
            if cursor.peek() != '"':
                raise _Unknown
            key = cursor.value()
            cursor.expect(":")
            reader = special(key)
            out[key] = reader() if reader is not None else cursor.value()
            if cursor.expect(",}") == "}":
                return out

    def data(self) -> Any:
        if self.cursor.peek() != "{":
            return self.cursor.value()
        return self.members(lambda key: self.tables if key == "tables" else None)

    def tables(self) -> Any:
        if self.cursor.peek() != "{":
            return self.cursor.value()
        return self.members(lambda key: self.rows)

    def rows(self) -> Any:
        cursor = self.cursor
        if cursor.peek() != "[":
            return cursor.value()
        at = cursor.offset()
        cursor.pos += 1
        count = 0
        # Each row is decoded to find its end and to prove it whole, then dropped.
        for _ in cursor.elements():
            count += 1
        return TableRows(self.body, at, count)


def parse(body: Body) -> Any:
    """The answer as ``strictjson.loads(body)`` gives it, with ``data.tables.<name>`` arrays as ``TableRows``.

    Raises what ``json.loads`` raises (``ValueError``, ``RecursionError``) for a body that is not JSON.
    """
    start = {"utf-8": 0, "utf-8-sig": 3}.get(json.detect_encoding(bytes(body[:4])))
    if start is not None:
        try:
            return _Scan(body, start).document()
        except (_Unknown, UnicodeDecodeError, RecursionError):
            pass
    return loads(body)
