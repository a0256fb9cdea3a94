-- A task's plan as work rows, one a call, as a PostgreSQL journal keeps it (its migrations 0001 to
-- 0006, pooler/journal/work.py): claimed by runners that hold a lease, moved to sent only under a
-- live one, recorded done only by the runner that holds the call, taken back from runners that
-- are gone. SQLite has no server clock: every time here is the runners' wall clock (they are all
-- on one host), lease_until and started in seconds since the epoch, sent_ms and done_ms in
-- milliseconds. A write transaction (BEGIN IMMEDIATE) serializes the runners of every process, as
-- the task's advisory lock and row locks do on PostgreSQL. The tasks, their calls' history
-- (calls) and their runs' facts (task_runs) are the tables of the earlier migrations.
-- What the task keeps of its pool and plan, as a JSON document (NULL: a task of an earlier
-- version, planned before tasks kept their plan as work rows).
ALTER TABLE tasks ADD COLUMN shared TEXT;
-- Why the task halted (stop_on_error, a call in doubt under --in-doubt stop): nothing more is sent.
ALTER TABLE tasks ADD COLUMN halted TEXT;
-- The run of the task its runners are in; runs counts the runners that joined it.
ALTER TABLE tasks ADD COLUMN again INTEGER NOT NULL DEFAULT 1;
-- The runners of a task: a lease each, and the calls each has in flight at most (--width; NULL:
-- the task's cap). host is file.host() (the machine since its boot): a runner of this host whose
-- process is gone is gone before its lease ends.
CREATE TABLE IF NOT EXISTS runners (
    id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started REAL NOT NULL,
    lease_until REAL NOT NULL,
    width INTEGER
);
CREATE INDEX IF NOT EXISTS runners_task ON runners (task);
-- A call of a task: data (its row or chunk) and entry, detail as JSON text, deps as a JSON array of
-- the step numbers it waits for. key_planned: whether key_text is the call's key as the planner made
-- it (NULL: not known there). epoch: the fencing epoch of its latest send. done_run: the runs of
-- the task when it was done (a call done in an earlier run than the task's again is told skipped).
CREATE TABLE IF NOT EXISTS work (
    task TEXT NOT NULL,
    num INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'call',
    row_first INTEGER,
    row_last INTEGER,
    size INTEGER NOT NULL DEFAULT 1,
    data TEXT,
    deps TEXT NOT NULL DEFAULT '[]',
    serial TEXT,
    state TEXT NOT NULL DEFAULT 'ready',
    runner TEXT,
    round INTEGER NOT NULL DEFAULT 1,
    doubted TEXT,
    key_text TEXT,
    key_planned INTEGER,
    step_id TEXT,
    status TEXT,
    entry TEXT,
    detail TEXT,
    doubt TEXT,
    epoch INTEGER,
    sent_ms INTEGER,
    done_ms INTEGER,
    done_run INTEGER,
    PRIMARY KEY (task, num, idx)
);
CREATE INDEX IF NOT EXISTS work_open ON work (task, state, num, idx) WHERE state <> 'done';
-- The open calls of a serialize_on value: a call waits for the earlier ones.
CREATE INDEX IF NOT EXISTS work_serial ON work (task, serial, num, idx)
WHERE serial IS NOT NULL AND state <> 'done';
-- The calls of a step that keep the steps waiting for it: not done, or done without landing.
CREATE INDEX IF NOT EXISTS work_unsettled ON work (task, num)
WHERE state <> 'done' OR status NOT IN ('completed', 'skipped');
-- The table rows the calls gave (a JSON array a call and table), which a step over an earlier
-- step's table reads.
CREATE TABLE IF NOT EXISTS table_rows (
    task TEXT NOT NULL,
    num INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    into_job TEXT,
    rows TEXT NOT NULL,
    PRIMARY KEY (task, num, idx, name)
);
-- The fencing epochs' sequence: each send takes the next, so a runner that takes a call back sends
-- it under a higher epoch than the runner it took it from.
CREATE TABLE IF NOT EXISTS work_epoch (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO work_epoch (id, value) VALUES (1, 0);
