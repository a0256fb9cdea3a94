-- The calls that ended without completing, found by a seek: a claim and a runner's tidy ask
-- whether the steps a step refers to left a call failed, and which step stopped a step that cannot
-- run, and read this small index, not every call of those steps (the calls not done yet they
-- find in work_open).  It holds no row a plan writes, so a plan's COPY does not pay for it.
CREATE INDEX IF NOT EXISTS work_failed ON work (task, num)
WHERE state = 'done' AND status NOT IN ('completed', 'skipped');
