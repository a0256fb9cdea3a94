"""The journal: what a run records and what every later run, ``runs``, ``show`` and the report
read, on SQLite or PostgreSQL."""
