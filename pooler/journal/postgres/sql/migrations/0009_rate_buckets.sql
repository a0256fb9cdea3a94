-- A rate limit every runner of a task holds, on every host (a pool file's `rate:`): one bucket a
-- name (the pool's, a step's, or a step's for one value of its `key` path), kept as the generic
-- cell rate algorithm keeps it: `tat`, the time (seconds since the epoch, on the database's
-- clock) at which the bucket is empty again. A call reserves the next slot in one statement and
-- waits for it where it runs, so runners never poll it.
CREATE TABLE IF NOT EXISTS buckets (
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    tat DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (task, name)
);
