-- The journal's tables: tasks, their runners and leases, the work rows of their calls, and the
-- table rows the calls gave.  Every migration can run again on a journal that has it (IF NOT
-- EXISTS, OR REPLACE): `pooler journal upgrade` repairs a journal that lacks what its version
-- promises by running again the migrations whose objects are missing.
CREATE TABLE IF NOT EXISTS pooler_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    pool_file TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL DEFAULT 'running',
    runs INTEGER NOT NULL DEFAULT 1,
    total INTEGER, succeeded INTEGER, failed INTEGER, skipped INTEGER, not_run INTEGER,
    answer TEXT,
    created TIMESTAMPTZ NOT NULL DEFAULT now(),
    shared JSONB,
    halted TEXT
);
CREATE INDEX IF NOT EXISTS tasks_pool ON tasks (pool_file, started);
CREATE TABLE IF NOT EXISTS runners (
    id TEXT PRIMARY KEY,
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_until TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS runners_task ON runners (task);
-- Entries, details and rows are JSON (not JSONB): the answer keeps the order of their keys.
CREATE TABLE IF NOT EXISTS work (
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    num INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'call',
    row_first INTEGER,
    row_last INTEGER,
    size INTEGER NOT NULL DEFAULT 1,
    data JSON,
    deps INTEGER[] NOT NULL DEFAULT '{}',
    serial TEXT,
    state TEXT NOT NULL DEFAULT 'ready',
    runner TEXT,
    round INTEGER NOT NULL DEFAULT 1,
    doubted TEXT,
    key_text TEXT,
    step_id TEXT,
    status TEXT,
    entry JSON,
    detail JSON,
    doubt TEXT,
    sent_at TIMESTAMPTZ,
    done_at TIMESTAMPTZ,
    PRIMARY KEY (task, num, idx)
);
CREATE INDEX IF NOT EXISTS work_open ON work (task, state, num, idx) WHERE state <> 'done';
CREATE INDEX IF NOT EXISTS work_busy ON work (task) WHERE state IN ('claimed', 'sent');
CREATE INDEX IF NOT EXISTS work_serial ON work (task, serial, num, idx) WHERE serial IS NOT NULL;
CREATE TABLE IF NOT EXISTS table_rows (
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    num INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    into_job TEXT,
    rows JSON NOT NULL,
    PRIMARY KEY (task, num, idx, name)
);
