"""The PostgreSQL journal: runners on several hosts share a task."""
