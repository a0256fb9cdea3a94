"""Data sources of steps over rows: CSV, JSONL, JSON; errors with lines; chunks; bounded memory."""

from __future__ import annotations

import csv
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from pooler.errors import InputError
from pooler.pool.rows import chunks, count_rows, format_of, iter_rows


def write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def message(path: Path, fmt: str | None = None) -> str:
    with pytest.raises(InputError) as info:
        list(iter_rows(path, fmt))
    return info.value.message


def test_csv_rows_are_strings_with_header_names_and_bom(tmp_path: Path) -> None:
    data = b'\xef\xbb\xbfsku,name,price\r\nA1,"Tea, green",1.50\r\n\r\nB2,Cup,3\r\n'
    src = write(tmp_path / "goods.csv", data)
    assert list(iter_rows(src)) == [
        {"sku": "A1", "name": "Tea, green", "price": "1.50"},
        {"sku": "B2", "name": "Cup", "price": "3"},
    ]
    assert count_rows(src) == 2


def test_csv_quoted_value_over_lines_and_short_row(tmp_path: Path) -> None:
    src = write(tmp_path / "a.csv", 'a,b,c\n"x\ny",2\n')
    assert list(iter_rows(src)) == [{"a": "x\ny", "b": "2", "c": ""}]


def test_csv_row_with_more_fields_names_its_line(tmp_path: Path) -> None:
    src = write(tmp_path / "a.csv", "a,b\n1,2\n\n1,2,3\n")
    assert message(src) == (
        f"{src} line 4 has 3 fields, more than the 2 of the header - quote values that hold a comma,"
        " or add the missing names to the header."
    )


def test_csv_header_naming_a_column_twice(tmp_path: Path) -> None:
    src = write(tmp_path / "a.csv", "a,b,a\n1,2,3\n")
    assert message(src) == f"{src} line 1: the header names 'a' twice - give every column its own name."


def test_csv_not_utf8_names_its_line(tmp_path: Path) -> None:
    src = write(tmp_path / "a.csv", b"a,b\n1,2\n" + "3,é\n".encode("latin-1"))
    assert message(src) == f"{src} line 3 is not utf-8 text - save it in utf-8."


def test_csv_is_read_as_a_stream(tmp_path: Path) -> None:
    src = write(tmp_path / "a.csv", "a\n1\n2\n" + "1,2\n")
    rows = iter_rows(src)
    assert next(rows) == {"a": "1"}
    assert next(rows) == {"a": "2"}
    with pytest.raises(InputError, match="line 4 has 2 fields"):
        next(rows)


def test_jsonl_rows_skip_blank_lines(tmp_path: Path) -> None:
    src = write(tmp_path / "rows.jsonl", '{"ref": 1, "sku": "A"}\n\n  \n{"ref": 2, "name": "Ž"}\n')
    assert list(iter_rows(src)) == [{"ref": 1, "sku": "A"}, {"ref": 2, "name": "Ž"}]
    assert count_rows(src) == 2


def test_jsonl_bad_line_names_file_and_line(tmp_path: Path) -> None:
    src = write(tmp_path / "rows.jsonl", '{"a": 1}\n{"a": 2\n')
    assert message(src) == (
        f"{src} line 2 is not whole json - Expecting ',' delimiter at column 8;"
        " write one JSON object per line."
    )


def test_jsonl_line_that_is_not_an_object(tmp_path: Path) -> None:
    src = write(tmp_path / "rows.jsonl", '{"a": 1}\n[1, 2]\n')
    assert message(src) == (
        f'{src} line 2 holds a list, not an object of fields - write one {{"field": value, ...}} per line.'
    )


def test_jsonl_not_utf8(tmp_path: Path) -> None:
    src = write(tmp_path / "rows.jsonl", b'{"a": 1}\n{"a": "\xff"}\n')
    assert message(src) == f"{src} line 2 is not utf-8 text - save it in utf-8."


def test_json_list_of_objects(tmp_path: Path) -> None:
    src = write(tmp_path / "rows.json", json.dumps([{"a": 1}, {"a": 2}, {"a": 3}]))
    assert [r["a"] for r in iter_rows(src)] == [1, 2, 3]
    assert count_rows(src) == 3


def test_json_errors(tmp_path: Path) -> None:
    cut = write(tmp_path / "cut.json", '[{"a": 1},\n {"a": ')
    assert message(cut) == (
        f"{cut} line 2 is not whole json - Expecting value at column 8; fix the file or write it again whole."
    )
    obj = write(tmp_path / "obj.json", '{"a": 1}')
    assert message(obj) == (
        f'{obj} holds an object, not a list of rows - write [{{"field": value, ...}}, ...].'
    )
    item = write(tmp_path / "item.json", '[{"a": 1}, "x"]')
    assert message(item) == (
        f"{item}: row 2 of the list is a string, not an object of fields -"
        ' write every row as {"field": value, ...}.'
    )
    assert count_rows(obj) is None


def test_format_given_overrides_the_extension(tmp_path: Path) -> None:
    src = write(tmp_path / "data.txt", "x,y\n1,2\n")
    assert list(iter_rows(src, "CSV")) == [{"x": "1", "y": "2"}]
    with pytest.raises(InputError) as info:
        iter_rows(src)
    assert info.value.message == (
        f"{src}: cannot tell the format from the name - name the file .csv, .jsonl or .json,"
        " or give its format (csv, jsonl, json)."
    )
    with pytest.raises(InputError) as bad:
        format_of(src, "xml")
    assert bad.value.message == f"{src}: the format 'xml' is not known - use csv, jsonl or json."
    assert count_rows(src) is None


def test_missing_file(tmp_path: Path) -> None:
    gone = tmp_path / "gone.jsonl"
    assert message(gone) == f"No such file: {gone}"
    assert count_rows(gone) is None
    assert message(tmp_path, "csv") == f"No such file: {tmp_path} - it is a folder; name a file."


def test_chunks() -> None:
    assert list(chunks(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunks([], 2)) == []
    assert list(chunks("ab", 2)) == [["a", "b"]]
    with pytest.raises(ValueError, match="chunk size must be 1 or more, not 0"):
        list(chunks([1], 0))


def test_chunks_are_lazy() -> None:
    pulled: list[int] = []

    def source() -> Iterator[int]:
        for i in range(10):
            pulled.append(i)
            yield i

    first = next(chunks(source(), 4))
    assert first == [0, 1, 2, 3]
    assert pulled == [0, 1, 2, 3]


@pytest.mark.parametrize(("ext", "count"), [("jsonl", 100_000), ("csv", 20_000)])
def test_rows_iterate_in_bounded_memory(tmp_path: Path, ext: str, count: int) -> None:
    src = tmp_path / f"big.{ext}"
    name = "A product with a fairly long name, " * 2
    with src.open("w", encoding="utf-8") as fh:
        if ext == "csv":
            fh.write("ref,sku,name\n")
            fh.writelines(f'{i},SKU-{i},"{name}{i}"\n' for i in range(count))
        else:
            fh.writelines(f'{{"ref": {i}, "sku": "SKU-{i}", "name": "{name}{i}"}}\n' for i in range(count))
    assert src.stat().st_size > count * 80
    tracemalloc.start()
    try:
        seen = 0
        last: dict[str, object] = {}
        for row in iter_rows(src):
            seen += 1
            last = row
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == count
    assert last["sku"] == f"SKU-{count - 1}"
    assert peak < 1_000_000, f"peak {peak} bytes: the rows were held in memory"
    assert count_rows(src) == count


@pytest.mark.parametrize("row", [{"a": "é\n\"x\\", "b": [1, 2.5, None, True], "c": {"d": "\u2028\u0000"}},
                                 [{"n": 1}, {"n": 2}], {"big": 10**30, "neg": -0.0}, {}])
def test_a_row_is_written_as_compact_json_as_dumps_writes_it(row: object) -> None:
    from pooler.pool.rows import row_encoder  # noqa: PLC0415

    for ascii_only in (False, True):
        assert row_encoder(ascii_only=ascii_only)(row) == json.dumps(row, ensure_ascii=ascii_only,
                                                                     separators=(",", ":"))


def test_a_jsonl_line_is_capped_as_a_csv_field_is_and_read_no_further(tmp_path: Path) -> None:
    limit = csv.field_size_limit()
    big = f'{{"ref": 2, "note": "{"x" * (20 * limit)}"}}\n'
    src = write(tmp_path / "rows.jsonl", '{"ref": 1}\n' + big + '{"ref": 3}\n')
    tracemalloc.start()
    try:
        told = message(src)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert told == (f"{src} line 2 is longer than {limit:,} bytes, the most a row may take (as a CSV field) "
                    "- keep big values out of the rows, in files of their own.")
    assert peak < 4 * limit, f"peak {peak} bytes: the long line was read whole"
    # Up to the cap a line is a row like any other.
    fits = '{"note": "' + "y" * (limit - 20) + '"}\n'
    assert len(fits.encode()) <= limit
    assert list(iter_rows(write(tmp_path / "fits.jsonl", fits))) == [json.loads(fits)]
    csv_src = write(tmp_path / "rows.csv", "ref,note\n2," + "x" * (limit + 1) + "\n")
    assert message(csv_src) == f"{csv_src} line 2 is not valid CSV - field larger than field limit ({limit})."
