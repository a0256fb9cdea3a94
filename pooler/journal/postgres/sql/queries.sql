-- The PostgreSQL journal's queries, by name (pooler/journal/queries.py reads them). The tables and
-- functions are made by the numbered files of migrations/; the claim, the outcome and the run of
-- a task again are functions there (pooler_claim_gate, pooler_done, pooler_run_again).

-- Tasks

-- name: tasks
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run
FROM tasks ORDER BY created DESC, id DESC LIMIT %s;

-- name: task
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run
FROM tasks WHERE id = %s;

-- name: last_unfinished
SELECT id FROM tasks WHERE pool_file = %s AND status <> 'completed' ORDER BY created DESC, id DESC LIMIT 1;

-- name: answer
SELECT answer FROM tasks WHERE id = %s;

-- name: finish_task
UPDATE tasks SET finished = %s, status = %s, total = %s, succeeded = %s, failed = %s, skipped = %s,
                 not_run = %s, answer = %s
WHERE id = %s;

-- name: shared
SELECT shared FROM tasks WHERE id = %s;

-- name: create_shared
-- A runner that creates the task at the same moment waits here until this one's plan commits
-- (then it finds the task) or is rolled back (then it plans the task itself).
INSERT INTO tasks (id, pool_file, started, shared) VALUES (%s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING RETURNING id;

-- name: lock_shared
-- The task's row held while its plan is widened: a second runner widening it waits, then sees
-- the sample widened already.
SELECT shared FROM tasks WHERE id = %s FOR UPDATE;

-- name: widen_sample
UPDATE tasks SET shared = shared || %s WHERE id = %s;

-- Runners

-- name: live_leases
SELECT id, host, pid FROM runners WHERE task = %s AND lease_until > now();

-- name: end_leases
-- Runners killed on this machine: their leases end now, so their calls are taken back at once.
UPDATE runners SET lease_until = now() WHERE id = ANY(%s);

-- name: run_again
SELECT pooler_run_again(%s, %s);

-- The plan

-- name: plan_counts
-- A call sent whose answer is not recorded is in doubt; a placeholder of a step over a table
-- counts once it is done (its step could not read the table).
SELECT sum(size),
       sum(size) FILTER (WHERE state = 'done' AND status = 'completed'),
       sum(size) FILTER (WHERE state = 'done' AND status = 'failed'),
       sum(size) FILTER (WHERE state = 'sent' OR (state = 'done' AND status = 'in_doubt')),
       sum(size) FILTER (WHERE state = 'done' AND status = 'skipped')
FROM work WHERE task = %s AND (kind = 'call' OR state = 'done');

-- name: planned
-- What the plan holds of each step: its rows, the idx its next call takes, whether the placeholder
-- of a step over a table is still there.
SELECT num, coalesce(sum(size) FILTER (WHERE kind = 'call'), 0),
       coalesce(max(idx) FILTER (WHERE kind = 'call') + 1, 0), bool_or(kind = 'expand')
FROM work WHERE task = %s GROUP BY num;
