-- What each runner's flow control did in a run (a FlowDoc: calls started, busy and gateway answers
-- and waits a second, the width, the breaker's events), for the answer's `flow` and the report:
-- a row a runner a run, in the order they were recorded.
CREATE TABLE IF NOT EXISTS flows (
    id INTEGER PRIMARY KEY,
    task TEXT NOT NULL,
    run INTEGER NOT NULL,
    runner TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS flows_of_task ON flows (task, run, id);
