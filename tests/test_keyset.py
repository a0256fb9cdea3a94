"""The plan's key set stays in bounded memory: past its limit the keys move to SQLite's private
temporary database, and a repeated key is still found, with the row that held it first."""

from __future__ import annotations

from pooler.pool.keyset import Holder, KeySet


def test_a_repeated_key_is_found_before_and_after_the_set_moves_to_sqlite() -> None:
    with KeySet(memory_keys=100) as keys:
        assert keys.add("k-0", Holder(1, 0)) is None
        assert keys.add("k-0", Holder(1, 5)) == Holder(1, 0)
        for row in range(1, 1000):
            assert keys.add(f"k-{row}", Holder(1, row)) is None
        assert keys._memory == {}  # every key now lives in the temporary table
        assert keys.add("k-0", Holder(2, None)) == Holder(1, 0)
        assert keys.add("k-999", Holder(1, 1000)) == Holder(1, 999)
        assert keys.add("fixed", Holder(3, None)) is None
        assert keys.add("fixed", Holder(4, 7)) == Holder(3, None)


def test_keys_are_kept_as_digests_never_as_text() -> None:
    with KeySet(memory_keys=2) as keys:
        keys.add("secret-token-value", Holder(1, 0))
        keys.add("other", Holder(1, 1))
        assert keys._db is not None
        stored = keys._db.execute("SELECT digest FROM keys").fetchall()
        assert all(b"secret" not in row[0] for row in stored)
