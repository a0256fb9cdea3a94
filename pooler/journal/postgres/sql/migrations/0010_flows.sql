-- What each runner's flow control did in a run of a task (record_flow): a FlowDoc
-- (pooler/journal/records.py), one row a runner a run, for the task's report. id keeps the order
-- they were recorded in; run is the task's run when it was recorded, not the doc's.
CREATE TABLE IF NOT EXISTS flows (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    run INTEGER NOT NULL,
    runner TEXT NOT NULL,
    doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS flows_task ON flows (task, run, id);
