"""Data sources of steps over rows: CSV, JSONL and JSON files, as dicts one row at a time.

CSV and JSONL are streamed line by line, so a file of any length runs in bounded memory.  A JSON
file is one document (a list of objects) and is read whole, up to ``MAX_JSON_BYTES``.
"""

from __future__ import annotations

import codecs
import csv
import json
import json.encoder
import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from pooler.errors import InputError
from pooler.infile import open_input

T = TypeVar("T")

FORMATS: tuple[str, ...] = ("csv", "jsonl", "json")
BY_EXTENSION = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json"}

#: A JSON source is parsed whole; beyond this size it should be written as JSONL.
MAX_JSON_BYTES = 256 * 1024 * 1024
#: count_rows parses a JSON source for its length only when it is this small.
_COUNT_JSON_BYTES = 16 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
UTF8 = "utf-8"


def row_encoder(*, ascii_only: bool = False) -> Callable[[Any], str]:
    """A function writing a row as compact JSON text, as a plan stores it: non-ASCII as itself, or
    (``ascii_only``) escaped, so the text reaches a database of any encoding.

    ``JSONEncoder.encode`` sets up the C encoder again for every value it is given, half the cost
    of a small row; the encoder is made once here (rows read from a file hold no cycles, so none
    are looked for).  The text is the one ``json.dumps(row, ensure_ascii=ascii_only,
    separators=(",", ":"))`` writes."""
    plain = json.JSONEncoder(ensure_ascii=ascii_only, separators=(",", ":"))
    # The C encoder json.encoder itself uses (typeshed does not list it).
    made = getattr(json.encoder, "c_make_encoder", None)
    if made is None:  # an interpreter without the C encoder
        return plain.encode
    strings = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring
    once = made(None, plain.default, strings, None, ":", ",", False, False, True)
    join = "".join

    def encode(row: Any) -> str:
        return join(once(row, 0))

    return encode


def json_kind(value: Any) -> str:
    """How a JSON value's kind reads in a message: an object, a list, a string..."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__


def format_of(path: Path, fmt: str | None = None) -> str:
    """The source's format: ``fmt`` when given, else told by the file's extension."""
    if fmt is not None:
        low = fmt.lower()
        if low not in FORMATS:
            raise InputError(f"{path}: the format {fmt!r} is not known - use csv, jsonl or json.")
        return low
    found = BY_EXTENSION.get(path.suffix.lower())
    if found is None:
        raise InputError(
            f"{path}: cannot tell the format from the name - name the file .csv, .jsonl or .json,"
            " or give its format (csv, jsonl, json)."
        )
    return found


def open_file(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes; a missing or unreadable file is an ``InputError``."""
    return open_input(path)


def encoding_problem(encoding: str) -> str | None:
    """What is wrong with a data file's ``encoding``, or None: files are read a line at a time, so
    the encoding must write a newline and ASCII as themselves (utf-8, latin-1, cp1251...)."""
    try:
        info = codecs.lookup(encoding)
    except LookupError:
        return (f"the encoding {encoding!r} is not known - write utf-8, latin-1, cp1252 or another "
                "codec's name.")
    if info.encode("\n,;\tAz09")[0] != b"\n,;\tAz09":
        return (f"the encoding {encoding!r} does not write a line end as one byte - pooler reads data files "
                "a line at a time; save the file as utf-8.")
    return None


def _capped_lines(path: Path, raw: IO[bytes], cap: int) -> Iterator[bytes]:
    """The lines of ``raw``, none read past ``cap`` bytes: a longer one is refused at its line."""
    num = 0
    while line := raw.readline(cap + 1):
        num += 1
        if len(line) > cap and not line.endswith(b"\n"):
            raise InputError(f"{path} line {num} is longer than {cap:,} bytes, the most a row may take (as a "
                             "CSV field) - keep big values out of the rows, in files of their own.")
        yield line


def _text_lines(path: Path, raw: IO[bytes], encoding: str = UTF8, *,
                cap: int | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) for every line of ``raw``, decoded strictly so a bad byte names its line;
    with ``cap``, no line longer than that many bytes."""
    for num, line in enumerate(raw if cap is None else _capped_lines(path, raw, cap), start=1):
        chunk = line[3:] if num == 1 and line.startswith(_BOM) and encoding == UTF8 else line
        try:
            text = chunk.decode(encoding)
        except UnicodeDecodeError:
            raise InputError(f"{path} line {num} is not {encoding} text - save it in {encoding}.") from None
        yield num, text


def _strict_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is too large for JSON")
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


_STRICT = json.JSONDecoder(parse_float=_strict_float, parse_constant=_no_constant)


def loads_strict(text: str) -> Any:
    """JSON text as Python values, refusing what a store's JSON cannot carry (NaN, Infinity, 1e999)."""
    return _STRICT.decode(text)


def _jsonl(path: Path, encoding: str = UTF8) -> Iterator[tuple[int | None, dict[str, Any]]]:
    with open_file(path) as raw:
        # A row a line, held to the cap of a CSV field: a huge line is refused before it is read whole.
        for num, text in _text_lines(path, raw, encoding, cap=csv.field_size_limit()):
            if not text.strip():
                continue
            try:
                row = loads_strict(text.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"{path} line {num} is not whole json - {exc.msg} at column {exc.colno};"
                    " write one JSON object per line."
                ) from None
            except ValueError as exc:
                raise InputError(f"{path} line {num}: {exc} - JSON carries only finite numbers; write the "
                                 "value as a number or as text.") from None
            if not isinstance(row, dict):
                raise InputError(
                    f"{path} line {num} holds {json_kind(row)}, not an object of fields -"
                    ' write one {"field": value, ...} per line.'
                )
            yield num, row


def _csv(path: Path, delimiter: str = ",",
         encoding: str = UTF8) -> Iterator[tuple[int | None, dict[str, Any]]]:
    with open_file(path) as raw:
        numbered = _text_lines(path, raw, encoding)
        last = 0

        def lines() -> Iterator[str]:
            nonlocal last
            for num, text in numbered:
                last = num
                yield text

        reader = csv.reader(lines(), delimiter=delimiter)
        header: list[str] | None = None
        while True:
            start = last + 1
            try:
                record = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise InputError(f"{path} line {start} is not valid CSV - {exc}.") from None
            if not record:
                continue
            if header is None:
                header = _header(path, record, start)
                continue
            if len(record) > len(header):
                raise InputError(
                    f"{path} line {start} has {len(record)} fields, more than the {len(header)}"
                    " of the header - quote values that hold a comma, or add the missing names to the header."
                )
            row = dict(zip(header, record, strict=False))
            # A short row is a row whose last values are empty, as spreadsheets write it.
            for name in header[len(record):]:
                row[name] = ""
            yield start, row


def _header(path: Path, record: list[str], line: int) -> list[str]:
    seen: set[str] = set()
    for name in record:
        if name in seen:
            raise InputError(
                f"{path} line {line}: the header names {name!r} twice - give every column its own name."
            )
        seen.add(name)
    return record


def _json(path: Path, encoding: str = UTF8) -> Iterator[tuple[int | None, dict[str, Any]]]:
    with open_file(path) as raw:
        data = raw.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise InputError(
            f"{path} is over {MAX_JSON_BYTES // (1024 * 1024)} MB - a JSON source is read whole; write it as"
            " JSONL (one object a line), which is read a row at a time."
        )
    try:
        text = data.decode("utf-8-sig" if encoding == UTF8 else encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path} line {line} is not {encoding} text - save it in {encoding}.") from None
    del data
    try:
        doc = loads_strict(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} line {exc.lineno} is not whole json - {exc.msg} at column {exc.colno};"
            " fix the file or write it again whole."
        ) from None
    except ValueError as exc:
        raise InputError(f"{path}: {exc} - JSON carries only finite numbers; write the value as a number "
                         "or as text.") from None
    if not isinstance(doc, list):
        raise InputError(
            f'{path} holds {json_kind(doc)}, not a list of rows - write [{{"field": value, ...}}, ...].'
        )
    for index, row in enumerate(doc):
        if not isinstance(row, dict):
            raise InputError(
                f"{path}: row {index + 1} of the list is {json_kind(row)}, not an object of fields -"
                ' write every row as {"field": value, ...}.'
            )
        yield None, row


def iter_rows(path: Path, fmt: str | None = None, *, delimiter: str | None = None,
              encoding: str | None = None) -> Iterator[dict[str, Any]]:
    """The rows of a CSV, JSONL or JSON file, one dict at a time (format by extension if not given).

    CSV values are strings; the first line names the fields (separated by ``delimiter``, a comma
    by default).  Errors are ``InputError`` naming the file and the line.
    """
    return (row for _, row in numbered_rows(path, fmt, delimiter=delimiter, encoding=encoding))


def numbered_rows(path: Path, fmt: str | None = None, *, delimiter: str | None = None,
                  encoding: str | None = None) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """``iter_rows`` with the line each row starts on (None in a JSON file, a document of its own)."""
    kind = format_of(path, fmt)
    enc = encoding or UTF8
    if kind == "csv":
        return _csv(path, delimiter or ",", enc)
    if kind == "jsonl":
        return _jsonl(path, enc)
    return _json(path, enc)


def count_rows(path: Path, fmt: str | None = None) -> int | None:
    """How many rows the file holds, cheaply, for progress; ``None`` when that is not known cheaply.

    CSV and JSONL count non-blank lines (a quoted CSV value spanning lines makes it a little high);
    a JSON source is parsed only when it is small.  A broken file gives ``None``: ``iter_rows``
    reports what is wrong with it.
    """
    try:
        kind = format_of(path, fmt)
        if kind == "json":
            if path.stat().st_size > _COUNT_JSON_BYTES:
                return None
            return sum(1 for _ in _json(path))
        with open_file(path) as raw:
            lines = sum(1 for line in raw if line.strip())
    except (InputError, OSError):
        return None
    if kind == "csv":
        return max(lines - 1, 0)
    return lines


def chunks(rows: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of up to ``size`` items, in order; the last one may be shorter."""
    if size < 1:
        raise ValueError(f"chunk size must be 1 or more, not {size}")
    batch: list[T] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
