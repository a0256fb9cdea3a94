-- A store's rate limit held by every task that calls it (`rate:` of a named store in stores.yaml,
-- `--store-rate`): one bucket a store, named by its URL as run/storeid.py writes it, kept as a
-- task's buckets are (`tat`, seconds since the epoch, the processes' wall clock), with the number
-- of slots it has given. On one host every process takes its slots in the default journal of the
-- state folder, whichever journal its task is in (docs/operations.md).
CREATE TABLE IF NOT EXISTS store_buckets (
    store TEXT PRIMARY KEY,
    tat REAL NOT NULL,
    slots INTEGER NOT NULL
);
-- Each task's fair share of a store's bucket: its own tat, spaced by the number of tasks that
-- want more of the store than they get, when its last slot was (a task whose last slot is a couple
-- of seconds old has stopped calling), and until when it counts as wanting more (its calls waited
-- for their slots).
CREATE TABLE IF NOT EXISTS store_shares (
    store TEXT NOT NULL,
    task TEXT NOT NULL,
    tat REAL NOT NULL,
    last REAL NOT NULL,
    hungry REAL NOT NULL,
    PRIMARY KEY (store, task)
);
