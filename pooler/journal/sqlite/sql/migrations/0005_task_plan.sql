-- A task's plan, recorded by its first run: the files it was planned from (num 0: the pool file;
-- else the step over that data file), with their sha256 and row counts, and every row each step
-- over a data file will send, with the row's key as the plan resolved it (masked, as every key
-- the journal keeps).  Later runs of the task take their rows from here, not from the files.
-- ``done``: a row a new plan (--replan) found done already, under a key an earlier plan sent.
-- ``chunk``: the step's chunk size (rows a call), so a chunk never answered is still counted.
-- ``first_run``: the run of the task that made this plan; records of earlier runs count rows
-- of an earlier plan.
CREATE TABLE IF NOT EXISTS plan_files (
    task TEXT NOT NULL,
    num INTEGER NOT NULL,
    name TEXT NOT NULL,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    rows INTEGER,
    chunk INTEGER,
    first_run INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (task, num)
);
CREATE TABLE IF NOT EXISTS plan_rows (
    task TEXT NOT NULL,
    num INTEGER NOT NULL,
    row INTEGER NOT NULL,
    key TEXT,
    data TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task, num, row)
) WITHOUT ROWID;
