-- The report's timeline: when each call left and was answered (milliseconds since the epoch,
-- UTC), in which concurrent slot (0 to width - 1), in which serialize_on group (its value as
-- JSON text, masked), and one row per run of a task: the store, the batch options, and the steps
-- (a JSON list of {"num", "name", "unit", "command", "over_rows", "key"}).  A journal without
-- them still reads: its report falls back to sent_at/done_at and works the slots out.
ALTER TABLE calls ADD COLUMN lane INTEGER;
ALTER TABLE calls ADD COLUMN serial TEXT;
ALTER TABLE calls ADD COLUMN sent_ms INTEGER;
ALTER TABLE calls ADD COLUMN done_ms INTEGER;
CREATE TABLE IF NOT EXISTS task_runs (
    task TEXT NOT NULL,
    run INTEGER NOT NULL,
    started_ms INTEGER NOT NULL,
    store TEXT,
    mode TEXT,
    width INTEGER,
    serialize_on TEXT,
    steps TEXT,
    PRIMARY KEY (task, run)
);
CREATE INDEX IF NOT EXISTS calls_task ON calls (task, run);
