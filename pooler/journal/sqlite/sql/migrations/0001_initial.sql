-- The SQLite journal: tasks, every call they made, and which process makes each run of a task.
-- Journals made before the journal recorded its version (PRAGMA user_version 0) run every
-- migration: each statement can run again on a file that has it (IF NOT EXISTS; an ADD COLUMN
-- of a column the table has is skipped), so whatever such a file holds, it ends the same.
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    pool_file TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL DEFAULT 'running',
    runs INTEGER NOT NULL DEFAULT 1,
    total INTEGER, succeeded INTEGER, failed INTEGER, skipped INTEGER, not_run INTEGER,
    answer TEXT
);
CREATE INDEX IF NOT EXISTS tasks_pool ON tasks (pool_file, started);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    task TEXT NOT NULL,
    run INTEGER NOT NULL,
    num INTEGER NOT NULL,
    row INTEGER,
    key TEXT,
    round INTEGER NOT NULL DEFAULT 1,
    step_id TEXT,
    status TEXT NOT NULL,
    in_doubt INTEGER NOT NULL DEFAULT 0,
    sent_at TEXT,
    done_at TEXT,
    result TEXT,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS calls_key ON calls (task, key) WHERE key IS NOT NULL;
CREATE TABLE IF NOT EXISTS runs (
    task TEXT NOT NULL,
    run INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    PRIMARY KEY (task, run)
);
