"""The store's pure parts in process: the streaming multipart reader and the casting of fields."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pooler.contract.fieldtypes import CastError, cast
from pooler.store.multipart import MultipartError, MultipartReader, boundary_of


class Trickle:
    """A socket-like stream that hands out the body in the given chunk sizes."""

    def __init__(self, body: bytes, sizes: list[int]) -> None:
        self.body = body
        self.sizes = sizes or [1]
        self.at = 0
        self.n = 0

    def read1(self, size: int, /) -> bytes:
        step = min(size, self.sizes[self.n % len(self.sizes)])
        self.n += 1
        out = self.body[self.at : self.at + step]
        self.at += len(out)
        return out


def _body(boundary: str, parts: list[tuple[str, bytes]]) -> bytes:
    out = b"preamble to ignore\r\n"
    for name, payload in parts:
        disposition = f'form-data; name="{name}"; filename="{name}.bin"'
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        out += b"Content-Type: application/octet-stream\r\n\r\n" + payload + b"\r\n"
    return out + f"--{boundary}--\r\nepilogue".encode()


def _read(reader: MultipartReader) -> list[tuple[str, str, bytes]]:
    got = []
    while (part := reader.next_part()) is not None:
        got.append((part.name, part.filename, part.read_all(1 << 30)))
    return got


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(
        st.binary(max_size=300) | st.sampled_from([b"\r\n--bound", b"--bound\r\n", b"\r\n", b"-"]), max_size=5
    ),
    sizes=st.lists(st.integers(min_value=1, max_value=70), min_size=1, max_size=8),
)
def test_parts_come_out_whole_however_the_body_arrives(payloads: list[bytes], sizes: list[int]) -> None:
    parts = [(f"data_{i}", p) for i, p in enumerate(payloads, 1)]
    body = _body("boundary42", parts)
    reader = MultipartReader(Trickle(body, sizes), "boundary42", len(body))
    assert _read(reader) == [(n, f"{n}.bin", p) for n, p in parts]


def test_a_part_is_read_in_pieces_and_the_rest_skipped() -> None:
    body = _body("b", [("request", b"{}"), ("data_1", b"x" * 100_000), ("data_2", b"two")])
    reader = MultipartReader(Trickle(body, [4096]), "b", len(body))
    first = reader.next_part()
    assert first is not None
    assert first.read(1) == b"{"
    second = reader.next_part()  # skips the rest of the first
    assert second is not None
    assert second.name == "data_1"
    assert len(second.read(10)) == 10
    third = reader.next_part()
    assert third is not None
    assert third.read_all(10) == b"two"
    assert reader.next_part() is None


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            b'--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nno end',
            "the body ends inside a part, with no closing boundary",
        ),
        (b"--b\r\nX-Other: 1\r\n\r\nx\r\n--b--", "a part has no Content-Disposition header"),
        (
            b"--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--",
            "a part's Content-Disposition names no part (name=...)",
        ),
        (b'--b\r\nContent-Disposition: form-data; name="a"', "the body ends inside a part's headers"),
    ],
)
def test_broken_bodies(body: bytes, error: str) -> None:
    reader = MultipartReader(Trickle(body, [7]), "b", len(body))
    with pytest.raises(MultipartError) as caught:
        _read(reader)
    assert str(caught.value) == error


def test_a_body_shorter_than_its_length_is_cut_off() -> None:
    body = _body("b", [("a", b"0123456789")])
    cut = body[: body.index(b"0123") + 4]
    reader = MultipartReader(Trickle(cut, [5]), "b", len(body))
    with pytest.raises(MultipartError, match="the body is cut off: the connection closed before its end"):
        _read(reader)


def test_boundary_of() -> None:
    assert boundary_of('multipart/form-data; boundary="abc def"') == "abc def"
    assert boundary_of("multipart/form-data; boundary=xyz") == "xyz"
    assert boundary_of("multipart/form-data") == ""
    assert boundary_of("application/json") is None


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_int_from_its_text(n: int) -> None:
    assert cast("int", str(n)) == n
    assert cast("int/json", f"[{n}]") == [n]


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_from_its_text(x: float) -> None:
    assert cast("float", repr(x)) == x


@given(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.lists(st.integers(), max_size=3)
    )
)
@example("0\x1f")  # str.strip drops it, int() does not
def test_a_cast_gives_the_type_or_a_reason(value: Any) -> None:
    for type_, kind in (("int", int), ("float", float), ("bool", bool), ("str", str)):
        try:
            got = cast(type_, value)
        except CastError as exc:
            reason = str(exc)
            assert reason, (type_, value)
        else:
            assert type(got) is kind
