-- A store's rate limit held by every task that calls it, on every host (`rate:` of a named store
-- in stores.yaml, `--store-rate`): one bucket a store, named by its URL as run/storeid.py writes
-- it, kept as a task's buckets are (`tat`, seconds since the epoch on the database's clock), with
-- the number of slots it has given.
CREATE TABLE IF NOT EXISTS store_buckets (
    store TEXT PRIMARY KEY,
    tat DOUBLE PRECISION NOT NULL,
    slots BIGINT NOT NULL
);
-- Each task's fair share of a store's bucket: its own tat, spaced by the number of tasks that
-- want more of the store than they get, when its last slot was (a task whose last slot is a couple
-- of seconds old has stopped calling), and until when it counts as wanting more (its calls waited
-- for their slots).
CREATE TABLE IF NOT EXISTS store_shares (
    store TEXT NOT NULL,
    task TEXT NOT NULL,
    tat DOUBLE PRECISION NOT NULL,
    last DOUBLE PRECISION NOT NULL,
    hungry DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (store, task)
);
