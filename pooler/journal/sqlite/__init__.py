"""The SQLite journal: one host, any number of processes."""
