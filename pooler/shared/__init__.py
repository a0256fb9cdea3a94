"""One task shared by runners on several hosts, on a PostgreSQL journal."""
