-- The rows a step's compare matches (pooler/run/compare.py): the store's table rows (side 0) and
-- the data file's rows (side 1), each as the digest of its match values and the digest of its
-- compared fields (pooler/pool/comparing.py; no value itself, so no secret either), so that a
-- million rows are matched here and not in memory. scope is the task being planned (or a dry
-- run's own), and its rows are dropped once it is classified.
CREATE TABLE IF NOT EXISTS compare_rows (
    scope TEXT NOT NULL,
    num INTEGER NOT NULL,
    side INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    match TEXT NOT NULL,
    digest TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS compare_rows_match ON compare_rows (scope, num, side, match, digest);
-- The rows a task's compares found unchanged and did not send, beside its counts of calls, for
-- `pooler runs` (the answer holds them too).
ALTER TABLE tasks ADD COLUMN unchanged INTEGER;
