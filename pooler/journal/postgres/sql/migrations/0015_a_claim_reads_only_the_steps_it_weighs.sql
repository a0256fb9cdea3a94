-- What a claim and a runner's tidy weigh of the steps a step refers to, found by a seek: the calls
-- those steps left unsettled (not done, or done without completing; SQLite's journal has this
-- index too), and, smaller, the calls that ended without completing (which step stopped a step
-- that cannot run).  Neither reads every call of the steps referred to.
CREATE INDEX IF NOT EXISTS work_unsettled ON work (task, num)
WHERE state <> 'done' OR status NOT IN ('completed', 'skipped');
CREATE INDEX IF NOT EXISTS work_failed ON work (task, num)
WHERE state = 'done' AND status NOT IN ('completed', 'skipped');
