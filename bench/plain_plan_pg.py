"""The floor of planning a big CSV into PostgreSQL: read it with the csv module and COPY a key and
the row per line into a table in one transaction.  ``python bench/plain_plan_pg.py ROWS.csv URL``."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import psycopg


def main(source: str, url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE plain_rows (n INTEGER PRIMARY KEY, key TEXT, data JSON)")
        with Path(source).open(newline="", encoding="utf-8") as f, \
                conn.cursor().copy("COPY plain_rows (n, key, data) FROM STDIN") as copy:
            for n, row in enumerate(csv.DictReader(f)):
                copy.write_row((n, "goods-" + row["ref"], json.dumps(row)))
        conn.commit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
