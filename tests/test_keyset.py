"""The plan's key set stays in bounded memory: past its limit the keys move to SQLite's private
temporary database, and a repeated key is still found, with the row that held it first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pooler.errors import CheckFailed
from pooler.pool.compiler import Inputs, compile_pool
from pooler.pool.keyset import MEMORY_KEYS, Holder, KeySet
from pooler.pool.loader import load_pool


def test_a_repeated_key_is_found_before_and_after_the_set_moves_to_sqlite() -> None:
    with KeySet(memory_keys=100) as keys:
        assert keys.add("k-0", 1, 0) is None
        assert keys.add("k-0", 1, 5) == Holder(1, 0)
        for row in range(1, 1000):
            assert keys.add(f"k-{row}", 1, row) is None
        assert keys._memory == {}  # every key now lives in the temporary table
        # Past the memory keys a repeat is told once the step's rows are read, with its first holder.
        assert keys.repeats(1, 10) == []
        assert keys.add("k-0", 2, 3) is None
        assert keys.repeats(2, 10) == [(Holder(2, 3), Holder(1, 0))]
        assert keys.add("k-999", 1, 1000) is None
        assert keys.add("k-1000", 1, 1001) is None
        assert keys.add("k-999", 1, 1002) is None
        assert keys.repeats(1, 10) == [(Holder(1, 1000), Holder(1, 999)), (Holder(1, 1002), Holder(1, 999))]
        assert keys.add("fixed", 3, None) is None
        assert keys.add("fixed", 4, 7) is None
        assert keys.repeats(4, 10) == [(Holder(4, 7), Holder(3, None))]
        # Each repeat is told once, and no more of them than asked for.
        assert keys.repeats(4, 10) == []
        for row in range(5):
            keys.add("k-1", 5, row)
        assert keys.repeats(5, 2) == [(Holder(5, 0), Holder(1, 1)), (Holder(5, 1), Holder(1, 1))]


def test_keys_are_kept_as_digests_never_as_text() -> None:
    with KeySet(memory_keys=2) as keys:
        keys.add("secret-token-value", 1, 0)
        keys.add("other", 1, 1)
        # Past the memory keys too: those the thread appends.
        keys.add("secret-token-value-2", 1, 2)
        assert keys.repeats(1, 10) == []
        assert keys._db is not None
        stored = keys._db.execute("SELECT * FROM keys ORDER BY seq").fetchall()
        assert len(stored) == 3
        # Every value an integer (the digest's halves, the holder): no text, no bytes.
        assert all(isinstance(value, int) for row in stored for value in row)
        assert [row[-2:] for row in stored] == [(1, 0), (1, 1), (1, 2)]


def test_every_holder_comes_back_as_it_went_in_from_memory_and_from_sqlite() -> None:
    # Holders are packed into one int in memory: a step's own key (no row) is not its row 0.
    holders = [Holder(1, None), Holder(1, 0), Holder(200, 0), Holder(7, (1 << 39) + 3), Holder(3, 12)]
    for limit in (1000, 3):
        with KeySet(memory_keys=limit) as keys:
            for i, holder in enumerate(holders):
                assert keys.add(f"key-{i}", *holder) is None
            assert (keys._db is None) == (limit == 1000)
            again = [keys.add(f"key-{i}", 9, 9 + i) for i in range(len(holders))]
            if limit == 1000:
                assert again == holders
            else:
                assert again == [None] * len(holders)
                assert keys.repeats(9, 10) == [(Holder(9, 9 + i), h) for i, h in enumerate(holders)]


def test_a_file_past_the_memory_keys_names_each_repeated_key_at_its_row(tmp_path: Path) -> None:
    rows = MEMORY_KEYS + 500
    # Row 4's key again once the set is in SQLite, and a key twice among those kept there.
    refs = [f"r{i}" for i in range(rows)]
    refs[MEMORY_KEYS + 100] = "r3"
    refs[MEMORY_KEYS + 300] = refs[MEMORY_KEYS + 200]
    (tmp_path / "goods.csv").write_text("ref\n" + "".join(f"{r}\n" for r in refs), encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - {unit: U, command: C, key: 'k-${row.ref}', params: {ref: '${row.ref}'},\n"
                    "     for_each: {file: goods.csv}}\n", encoding="utf-8")
    with pytest.raises(CheckFailed) as refused:
        compile_pool(load_pool(pool, partial=True), inputs=Inputs())
    data = tmp_path / "goods.csv"
    fix = ("keys must be unique: the second call would be skipped as done. Put the field that tells the "
           "rows apart in the key.")
    again = MEMORY_KEYS + 200
    assert [p.message for p in refused.value.problems()] == [
        f"rows 4 and {MEMORY_KEYS + 101} of {data} give one key [k-r3] - {fix}",
        f"rows {again + 1} and {again + 101} of {data} give one key [k-r{again}] - {fix}"]


def test_repeats_past_the_memory_keys_are_told_in_row_order_across_chunks_steps_and_unfilled_keys(
        tmp_path: Path) -> None:
    # Chunks of 2 past the memory keys: a chunk's first row again, later a row whose key cannot be
    # filled between two repeats; then a step over another file repeating the first step's keys
    # (one past the memory keys, one within them) and a literal key.
    rows = 2 * MEMORY_KEYS + 1000
    refs: list[str | None] = [f"r{i}" for i in range(rows)]
    late = 2 * MEMORY_KEYS + 100
    refs[late] = "r4"
    refs[late + 50] = None
    refs[late + 100] = f"r{late - 2}"
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"ref": r} if r else {"n": 1}) + "\n" for r in refs),
                                      encoding="utf-8")
    other = [f"s{i}" for i in range(6)]
    other[1], other[2], other[4] = f"r{late + 200}", "r10", "fixed"
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"ref": r}) + "\n" for r in other), encoding="utf-8")
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "pool:\n"
        "  - {unit: U, command: C, key: 'k-${row.ref}', chunk_row: {n: '${row.n}'}, params: {},\n"
        "     for_each: {file: a.jsonl, chunk: 2, field: rows}}\n"
        "  - {unit: U, command: C, key: 'k-fixed', params: {}}\n"
        "  - {unit: U, command: C, key: 'k-${row.ref}', params: {}, for_each: {file: b.jsonl}}\n",
        encoding="utf-8")
    with pytest.raises(CheckFailed) as refused:
        compile_pool(load_pool(pool, partial=True), inputs=Inputs())
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    fix = ("keys must be unique: the second call would be skipped as done. Put the field that tells the "
           "rows apart in the key.")
    assert [p.message for p in refused.value.problems() if p.path and p.path.endswith("key")] == [
        f"the chunks from rows 5 and {late + 1} of {a} give one key [k-r4] - {fix}",
        f"row {late + 51} of {a}: ${{row.ref}}: row has no field [ref] - its fields: n.",
        f"the chunks from rows {late - 1} and {late + 101} of {a} give one key [k-r{late - 2}] - {fix}",
        f"row 2 of {b} gives the key [k-r{late + 200}], which row {late + 201} of step 1 gives too - {fix}",
        f"row 3 of {b} gives the key [k-r10], which row 11 of step 1 gives too - {fix}",
        (f"row 5 of {b} gives the key [k-fixed], which step 2 carries too - keys must be unique in a pool: "
         "a keyed call runs at most once per task.")]
