-- What each runner's flow control did in a run of a task (record_flow): a FlowDoc as JSON text
-- (pooler/journal/records.py), one row a runner a run, for the task's report. id keeps the order
-- they were recorded in; run is the journal's run of the task when it was recorded, not the doc's.
CREATE TABLE IF NOT EXISTS flows (
    id INTEGER PRIMARY KEY,
    task TEXT NOT NULL,
    run INTEGER NOT NULL,
    runner TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS flows_task ON flows (task, run, id);
