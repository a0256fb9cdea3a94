-- The calls that ended without completing, found by a seek: a runner's tidy asks which steps a
-- step refers to stopped it, and reads this small index, not every unsettled call of those steps
-- (a step referred to may still have a million calls to go).
CREATE INDEX IF NOT EXISTS work_failed ON work (task, num)
WHERE state = 'done' AND status NOT IN ('completed', 'skipped');
