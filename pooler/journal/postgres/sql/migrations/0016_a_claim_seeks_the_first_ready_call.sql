-- The ready calls of a task in file order, and nothing else: a claim, and a runner's tidy, seek
-- the first one here. The planner is told of a task's rows once they are planned, every call
-- ready; weighed so, reading the calls in file order and passing over those not ready looked as
-- cheap as this seek, and as a long import went on it passed over every call done so far (15 ms
-- a claim with 20,000 of a million done, and growing). Here nothing is passed over: no plan
-- reads the done calls first.
CREATE INDEX IF NOT EXISTS work_ready ON work (task, num, idx) WHERE state = 'ready';
