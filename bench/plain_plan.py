"""The floor of planning a big CSV: read it with the csv module and insert a key and the row per
line into SQLite in one transaction.  ``python bench/plain_plan.py ROWS.csv DB``."""

from __future__ import annotations

import csv
import json
import sqlite3
import sys
from pathlib import Path


def main(source: str, target: str) -> None:
    db = sqlite3.connect(target, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE rows (n INTEGER PRIMARY KEY, key TEXT, data TEXT)")
    db.execute("BEGIN")
    with Path(source).open(newline="", encoding="utf-8") as f:
        rows = enumerate(csv.DictReader(f))
        db.executemany("INSERT INTO rows VALUES (?, ?, ?)",
                       ((n, "goods-" + row["ref"], json.dumps(row)) for n, row in rows))
    db.execute("COMMIT")
    db.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
