-- The PostgreSQL journal's queries, by name (pooler/journal/queries.py reads them). The tables and
-- functions are made by the numbered files of migrations/; the claim, the outcome and the run of
-- a task again are functions there (pooler_claim_gate, pooler_done, pooler_run_again).

-- Tasks

-- name: tasks
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run,
       NULL AS store
FROM tasks ORDER BY created DESC, id DESC LIMIT %(limit)s;

-- name: task
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run,
       NULL AS store
FROM tasks WHERE id = %(task)s;

-- name: last_unfinished
SELECT id FROM tasks WHERE pool_file = %s AND status <> 'completed' ORDER BY created DESC, id DESC LIMIT 1;

-- name: answer
-- The answer is kept as its text (as the runner wrote it): read as JSON.
SELECT answer::json AS answer FROM tasks WHERE id = %(task)s;

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

-- name: skip_keys_of_scope
-- A new task's calls whose key another task of its scope (the MCP server's session) has landed:
-- skipped, with that call's outcome, as a key an earlier run landed is on SQLite. Arguments: the
-- scope, the task, the task.
UPDATE work w SET state = 'done', status = 'skipped', runner = NULL, step_id = e.step_id, detail = e.detail,
                  entry = pooler_entry_with(e.entry, json_build_object('status', 'skipped')),
                  done_run = (SELECT runs FROM tasks WHERE id = w.task), done_at = now()
FROM (SELECT DISTINCT ON (d.key_text) d.key_text, d.entry, d.detail, d.step_id
      FROM work d JOIN tasks t ON t.id = d.task
      WHERE t.shared ->> 'key_scope' = %s AND d.task <> %s AND d.state = 'done'
        AND d.status IN ('completed', 'skipped') AND d.key_text IS NOT NULL
      ORDER BY d.key_text, d.done_at DESC) e
WHERE w.task = %s AND w.state = 'ready' AND w.key_text = e.key_text;

-- name: analyze_work
-- After a plan is written: the query planner needs to know how many calls there are to pick the indexes.
ANALYZE work;

-- name: lock_shared
-- The task's row held while its plan is widened: a second runner widening it waits, then sees
-- the sample widened already.
SELECT shared FROM tasks WHERE id = %s FOR UPDATE;

-- name: update_shared
-- What the task keeps of its pool and plan, changed: its sample widened, its files planned again.
UPDATE tasks SET shared = shared || %s WHERE id = %s;

-- Runners

-- name: runners_of_task
-- Every runner of the task, whether its lease is alive on the database's clock.
SELECT id, host, pid, lease_until > now() AS leased, width, extract(epoch FROM started)::float8 AS started
FROM runners WHERE task = %(task)s;

-- name: runners_left
-- Runners that left with calls they could not record (their row is gone).
SELECT DISTINCT runner FROM work w WHERE task = %(task)s AND state IN ('claimed', 'sent')
  AND NOT EXISTS (SELECT 1 FROM runners r WHERE r.id = w.runner);

-- name: end_leases
-- Runners killed on this machine: their leases end now, so their calls are taken back at once.
UPDATE runners SET lease_until = now() WHERE id IN (SELECT jsonb_array_elements_text(%(ids)s));

-- name: take_lease
-- A runner of the task: its lease, on the database's clock, and the calls it has in flight at most.
-- Taken as the transaction that creates or joins the task ends: from the clock of now, not of the
-- transaction's start (a plan may take longer than a lease).
INSERT INTO runners (id, task, host, pid, lease_until, width)
VALUES (%(id)s, %(task)s, %(host)s, %(pid)s, clock_timestamp() + make_interval(secs => %(seconds)s),
        %(width)s);

-- name: renew_lease
-- Only while the lease is alive: a runner whose calls were taken back never gets it again.
UPDATE runners SET lease_until = now() + make_interval(secs => %(seconds)s)
WHERE id = %(id)s AND lease_until > now();

-- name: give_up_lease
DELETE FROM runners WHERE id = %(id)s;

-- name: run_again
SELECT pooler_run_again(%s, %s);

-- A run again's steps over a table of a step it sends again (pooler.journal.work.plan_again),
-- in the transaction of pooler_run_again, under its task lock.

-- name: step_open
SELECT count(*) FROM work WHERE task = %s AND num = %s AND state NOT IN ('done', 'beyond');

-- name: drop_open_calls
DELETE FROM work WHERE task = %s AND num = %s AND kind = 'call' AND state IN ('ready', 'beyond');

-- name: has_placeholder
SELECT count(*) FROM work WHERE task = %s AND num = %s AND idx = %s;

-- name: drop_open_tables
DELETE FROM table_rows t WHERE t.task = %s AND NOT EXISTS (SELECT 1 FROM work w
    WHERE w.task = t.task AND w.num = t.num AND w.idx = t.idx AND w.state = 'done');

-- name: landed
-- A call of the key that completed in the run the task is in: its entry and detail.
SELECT entry, detail FROM work
WHERE task = %s AND key_text = %s AND state = 'done' AND status = 'completed'
  AND done_run >= (SELECT again FROM tasks WHERE id = %s)
ORDER BY num, idx LIMIT 1;

-- name: kept_keys
-- The keys of the calls a step holds (done, in doubt, or in flight): its placeholder made again
-- leaves them out.
SELECT DISTINCT key_text FROM work WHERE task = %s AND num = %s AND kind = 'call' AND key_text IS NOT NULL;

-- The plan

-- name: plan_counts
-- The task's calls by status (a chunk of 500 rows is one call, as the run counts it; NULL: no plan).
-- A call sent whose answer is not recorded is in doubt, as is one a run again left to its runners'
-- rule (state doubt); a placeholder of a step over a table
-- counts once it is done (its step could not read the table).
SELECT nullif(count(*), 0),
       count(*) FILTER (WHERE state = 'done' AND status = 'completed'),
       count(*) FILTER (WHERE state = 'done' AND status = 'failed'),
       count(*) FILTER (WHERE state IN ('sent', 'doubt') OR (state = 'done' AND status = 'in_doubt')),
       count(*) FILTER (WHERE state = 'done' AND status = 'skipped')
FROM work WHERE task = %s AND (kind = 'call' OR state = 'done');

-- name: planned
-- What the plan holds of each step: its rows, the idx its next call takes, whether the placeholder
-- of a step over a table is still there.
SELECT num, coalesce(sum(size) FILTER (WHERE kind = 'call'), 0),
       coalesce(max(idx) FILTER (WHERE kind = 'call') + 1, 0), bool_or(kind = 'expand')
FROM work WHERE task = %s GROUP BY num;

-- The work of a task, as one runner sees it (work.py). A work row is read as its columns
-- num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text,
-- step_id (WorkRow's fields); a claimed one also gives its epoch when the claim moved it to sent.

-- name: lock_task
-- The task's lock. A transaction that changes a task's work and then takes a lock a run again or
-- a claim holds (this one, the task's row) takes this first: a run again holds both while it
-- changes work rows, and locks taken in the other order deadlock with it.
SELECT pg_advisory_xact_lock(hashtext(%s));

-- name: claim
SELECT num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text,
       step_id, CASE WHEN state = 'sent' THEN epoch END
FROM pooler_claim(%s, %s, %s, %s);

-- name: claim_gate
SELECT num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text,
       step_id, CASE WHEN state = 'sent' THEN epoch END
FROM pooler_claim_gate(%s, %s, %s, %s, %s);

-- name: done_and_claim
-- A call's outcome and the next claim in one statement: the claim takes the outcome's result as
-- an argument, so it runs after it (and claims nothing when the outcome was not this runner's).
-- The task's lock the claim takes is taken before the outcome changes the call's row (see
-- lock_task): the outcome is computed from the row that gives the lock.
SELECT d.ok, c.num, c.idx, c.kind, c.row_first, c.row_last, c.size, c.data, c.deps, c.serial,
       c.round, c.doubted, c.key_text, c.step_id, CASE WHEN c.state = 'sent' THEN c.epoch END
FROM (SELECT pooler_done(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) AS ok
      FROM (SELECT pg_advisory_xact_lock(hashtext(%s))) AS locked) d
LEFT JOIN LATERAL pooler_claim(%s, %s, CASE WHEN d.ok IS NULL THEN 0 ELSE %s END, %s) c ON true;

-- name: done_and_claim_gate
SELECT d.ok, c.num, c.idx, c.kind, c.row_first, c.row_last, c.size, c.data, c.deps, c.serial,
       c.round, c.doubted, c.key_text, c.step_id, CASE WHEN c.state = 'sent' THEN c.epoch END
FROM (SELECT pooler_done(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) AS ok
      FROM (SELECT pg_advisory_xact_lock(hashtext(%s))) AS locked) d
LEFT JOIN LATERAL pooler_claim_gate(%s, %s, CASE WHEN d.ok IS NULL THEN 0 ELSE %s END, %s, %s) c ON true;

-- name: unclaim_gone
UPDATE work SET state = 'ready', runner = NULL WHERE task = %s AND state = 'claimed' AND runner = ANY(%s);

-- name: in_doubt_to_rule
-- Calls sent by gone runners (expired: true) and calls a run again left in doubt (false), with no
-- epoch and the seconds since their request left.
SELECT num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text,
       step_id, NULL::bigint, extract(epoch FROM clock_timestamp() - sent_at)::float8, state = 'sent'
FROM work WHERE task = %s AND (state = 'doubt' OR state = 'sent' AND runner = ANY(%s))
ORDER BY num, idx;

-- name: send_again
-- A call in doubt sent again under its same key and round, naming the call it repeats.
UPDATE work SET state = 'ready', runner = NULL, doubted = %s, status = NULL, entry = NULL, detail = NULL,
                doubt = NULL, done_at = NULL
WHERE task = %s AND num = %s AND idx = %s;

-- name: forget_runners
DELETE FROM runners WHERE id = ANY(%s);

-- name: blocked
-- Ready calls of a step that refers to one that did not complete, with the first such step and
-- its status (in doubt before the others).
SELECT num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text, step_id,
       (SELECT d.num FROM work d WHERE d.task = w.task AND d.num = ANY(w.deps) AND d.state = 'done'
          AND d.status NOT IN ('completed', 'skipped') ORDER BY d.num LIMIT 1),
       (SELECT d.status FROM work d WHERE d.task = w.task AND d.num = ANY(w.deps) AND d.state = 'done'
          AND d.status NOT IN ('completed', 'skipped') ORDER BY d.num, d.status = 'in_doubt' DESC LIMIT 1)
FROM work w WHERE w.task = %s AND w.state = 'ready' AND w.deps <> '{}'
  AND EXISTS (SELECT 1 FROM work d WHERE d.task = w.task AND d.num = ANY(w.deps) AND d.state = 'done'
                AND d.status NOT IN ('completed', 'skipped'))
FOR UPDATE SKIP LOCKED;

-- name: end_call
-- A call ended without being sent (ruled in doubt, or its step cannot run), its record joining the
-- history. Arguments: status, entry, doubt, task, num, idx.
WITH a AS (SELECT %s AS status, %s::json AS entry, %s AS doubt, %s AS task, %s::int AS num, %s::int AS idx),
t AS (SELECT runs, again FROM tasks WHERE id = (SELECT task FROM a)),
done AS (
    UPDATE work w SET state = 'done', runner = NULL, status = a.status, entry = a.entry, doubt = a.doubt,
                      done_at = now(), done_run = (SELECT runs FROM t)
    FROM a WHERE w.task = a.task AND w.num = a.num AND w.idx = a.idx
    RETURNING w.num, w.idx, w.row_first, w.key_text, w.step_id, w.serial)
INSERT INTO calls (task, run, num, idx, row, key, step_id, status, in_doubt, serial, done_ms, entry)
SELECT a.task, (SELECT again FROM t), d.num, d.idx, d.row_first, d.key_text, d.step_id, a.status,
       coalesce(a.doubt = 'skipped', false), d.serial, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT, a.entry
FROM done d, a;

-- name: not_sent
-- A call claimed (perhaps moved to sent with its claim) from which no request left.
UPDATE work SET sent_at = NULL
WHERE task = %s AND num = %s AND idx = %s AND runner = %s AND state IN ('claimed', 'sent');

-- name: task_halted
SELECT halted FROM tasks WHERE id = %s;

-- name: halt_task
UPDATE tasks SET halted = coalesce(halted, %s) WHERE id = %s;

-- name: gate
-- claimed -> sent, only while the runner's lease is alive and the task not halted (see WorkStore.gate).
WITH t AS (SELECT halted FROM tasks WHERE id = %s FOR SHARE)
UPDATE work SET state = 'sent', sent_at = clock_timestamp(), key_text = %s, step_id = %s, round = %s,
                epoch = nextval('pooler_epoch'), serial = coalesce(%s, serial)
WHERE task = %s AND num = %s AND idx = %s AND runner = %s
  AND (state = 'claimed' OR state = 'sent' AND epoch = %s)
  AND EXISTS (SELECT 1 FROM t WHERE halted IS NULL)
  AND EXISTS (SELECT 1 FROM runners WHERE id = %s AND lease_until > now())
RETURNING epoch;

-- name: serial_busy
-- Another call of the task with this serialize_on value claimed or sent: a call whose value a
-- reference gave waits for it (migration 0008), read under the task's lock.
SELECT count(*) FROM work WHERE task = %s AND serial = %s AND state IN ('claimed', 'sent')
  AND NOT (num = %s AND idx = %s);

-- name: release
UPDATE work SET state = 'ready', runner = NULL
WHERE task = %s AND num = %s AND idx = %s AND runner = %s AND state IN ('claimed', 'sent');

-- name: done
SELECT pooler_done(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: done_now
-- A call whose outcome halted the task is done once the halt holds.
UPDATE work SET done_at = clock_timestamp() WHERE task = %s AND num = %s AND idx = %s;

-- name: keep_table_rows
INSERT INTO table_rows (task, num, idx, name, prefix, into_job, rows) VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (task, num, idx, name) DO UPDATE SET rows = excluded.rows;

-- name: take_placeholder
DELETE FROM work WHERE task = %s AND num = %s AND idx = %s AND runner = %s AND state = 'claimed';

-- name: open_counts
-- Calls ready, calls claimed, sent or left in doubt (by anyone), and why the task halted; the calls
-- planned beyond the task's sample are neither.
SELECT count(*) FILTER (WHERE state = 'ready'), count(*) FILTER (WHERE state NOT IN ('ready', 'beyond')),
       (SELECT halted FROM tasks WHERE id = %s)
FROM work WHERE task = %s AND state <> 'done';

-- name: details
-- The detail each step gives references: that of its last call that completed.
SELECT DISTINCT ON (num) num, detail FROM work
WHERE task = %s AND num = ANY(%s) AND status IN ('completed', 'skipped') ORDER BY num, idx DESC;

-- name: table_names
SELECT DISTINCT name FROM table_rows WHERE task = %s AND num = %s ORDER BY name;

-- name: table_parts
SELECT rows FROM table_rows WHERE task = %s AND num = %s AND name = %s ORDER BY idx;

-- name: copy_work
-- The work rows a plan gives (a task planned, widened, or a step over a table expanded); the
-- values come in this order (journal.py's WORK_TYPES gives their types).
COPY work (task, num, idx, kind, row_first, row_last, size, data, deps, serial, key_text, key_planned,
           state)
FROM STDIN;

-- A shared task's answer (shared/answer.py)

-- name: answer_rows
-- Every call of the task in file order (but those planned beyond its sample), when it was sent and done (ms), and whether it was
-- done in an earlier run than the one the task is in (a call done before schema version 6 has no run: it was), and its key and rows.
SELECT num, idx, kind, size, state, status, entry, doubt, doubted, step_id, detail,
       (extract(epoch FROM sent_at) * 1000)::bigint, (extract(epoch FROM done_at) * 1000)::bigint,
       state = 'done' AND (done_run IS NULL OR done_run < (SELECT again FROM tasks WHERE id = %s)),
       key_text, row_first, row_last
FROM work WHERE task = %s AND state <> 'beyond' ORDER BY num, idx;

-- name: answer_state
SELECT shared, status, answer IS NULL FROM tasks WHERE id = %s;

-- A task's report (history.py)

-- name: record_run
INSERT INTO task_runs (task, run, store, mode, width, serialize_on, steps, again)
VALUES (%s, (SELECT again FROM tasks WHERE id = %s), %s, %s, %s, %s, %s, %s)
ON CONFLICT (task, run) DO NOTHING;

-- name: record_flow
-- One runner's flow control in the run the task is in (the journal's run, not the doc's).
INSERT INTO flows (task, run, runner, doc) SELECT id, again, %s, %s FROM tasks WHERE id = %s;

-- name: flows
SELECT run, doc FROM flows WHERE task = %(task)s ORDER BY run, id;

-- name: report_runs
SELECT run, store, mode, width, serialize_on, steps, again FROM task_runs WHERE task = %(task)s ORDER BY run;

-- name: report_calls
-- Every record, then the calls sent whose outcome is not recorded (negative ids: no record).
SELECT id, run, num, row, key, step_id, status, in_doubt, NULL::int AS lane, serial, sent_ms, done_ms,
       NULL::text AS sent_at, NULL::text AS done_at
FROM calls WHERE task = %(task)s
UNION ALL
SELECT -row_number() OVER (ORDER BY w.num, w.idx), t.again, w.num, w.row_first, w.key_text, w.step_id,
       'sent', false, NULL::int, w.serial, (extract(epoch FROM w.sent_at) * 1000)::BIGINT, NULL::BIGINT,
       NULL::text, NULL::text
FROM work w JOIN tasks t ON t.id = w.task WHERE w.task = %(task)s AND w.state = 'sent'
ORDER BY 11 NULLS LAST, 1;

-- name: report_first_entries
SELECT DISTINCT ON (num) num, entry FROM calls WHERE task = %(task)s ORDER BY num, id;

-- name: report_entries
-- The ids come as one JSON array.
SELECT id, entry FROM calls
WHERE task = %(task)s AND id IN (SELECT jsonb_array_elements_text(%(ids)s)::bigint);

-- name: report_table_entries
SELECT entry FROM calls WHERE task = %(task)s AND run = %(run)s AND status = 'completed'
  AND entry::text LIKE '%%"tables":{"%%';

-- A sampled task widened (journal.py)

-- name: cut_by_sample
-- The chunks planned beyond the sample that a wider sample of %s rows cuts.
SELECT num, idx, row_first, data FROM work
WHERE task = %s AND state = 'beyond' AND row_last IS NOT NULL AND row_first < %s AND row_last >= %s;

-- name: make_room_out
-- The calls of a step after idx moved one on, in two statements (a key is checked row by row):
-- first out of the way, to -(idx + 1) - 1 (below the placeholder's -1), then back, one on.
UPDATE work SET idx = -idx - 2 WHERE task = %s AND num = %s AND idx > %s;

-- name: make_room_back
UPDATE work SET idx = -idx - 1 WHERE task = %s AND num = %s AND idx < -1;

-- name: drop_call
DELETE FROM work WHERE task = %s AND num = %s AND idx = %s;

-- name: release_beyond
-- The calls the wider sample (NULL: every row) holds, released to be claimed.
UPDATE work SET state = 'ready' WHERE task = %s AND state = 'beyond' AND (%s::int IS NULL OR row_first < %s);

-- name: planned_calls
SELECT count(*) FROM work WHERE task = %s AND state <> 'beyond';

-- name: runs_of_task
SELECT runs FROM tasks WHERE id = %s;

-- --replan of a shared task (replan.py)

-- name: step_calls
SELECT idx, state, status, key_text, data, round FROM work
WHERE task = %s AND num = %s AND kind = 'call' ORDER BY idx;

-- name: drop_calls
DELETE FROM work WHERE task = %s AND num = %s AND idx = ANY(%s);

-- name: set_round
UPDATE work SET round = %s WHERE task = %s AND num = %s AND idx = %s;

-- name: table_rows_of_task
-- Every table part the task's calls gave, for pooler gather: each table's parts in call order.
SELECT num, idx, name, prefix, into_job, rows FROM table_rows WHERE task = %s ORDER BY num, name, idx;

-- A redrive (pooler.journal.work.redrive_again), in the transaction that begins it, under the
-- task's lock (redrive_lock, as pooler_run_again takes it). Each takes the task, what it sends
-- again (failed, in_doubt, not_run: 1 or 0) and its scope (step: a step number or NULL; lo, hi:
-- the rows a call must touch, or NULL). The calls it does not send are set aside first (not run,
-- in doubt), so the ones it puts back are not.

-- name: redrive_lock
SELECT pg_advisory_xact_lock(hashtext(%(task)s)), (SELECT 1 FROM tasks WHERE id = %(task)s FOR UPDATE);

-- name: redrive_live
SELECT EXISTS (SELECT 1 FROM runners WHERE task = %(task)s AND lease_until > now());

-- name: redrive_aside
UPDATE work SET state = 'done', status = 'not_run', runner = NULL
WHERE task = %(task)s AND state = 'ready' AND NOT (%(not_run)s = 1
    AND (%(step)s::int IS NULL OR num = %(step)s::int)
    AND (%(lo)s::int IS NULL OR (coalesce(row_last, row_first) >= %(lo)s::int AND row_first <= %(hi)s::int)));

-- name: redrive_doubt_aside
UPDATE work SET state = 'done', runner = NULL
WHERE task = %(task)s AND state = 'doubt' AND NOT (%(in_doubt)s = 1
    AND (%(step)s::int IS NULL OR num = %(step)s::int)
    AND (%(lo)s::int IS NULL OR (coalesce(row_last, row_first) >= %(lo)s::int AND row_first <= %(hi)s::int)));

-- name: redrive_failed
UPDATE work SET state = 'ready', runner = NULL, doubted = NULL,
    round = CASE WHEN (entry ->> 'result') = 'true' THEN round ELSE round + 1 END,
    status = NULL, entry = NULL, detail = NULL, doubt = NULL, sent_at = NULL, done_at = NULL
WHERE task = %(task)s AND state = 'done' AND status = 'failed' AND %(failed)s = 1
    AND (%(step)s::int IS NULL OR num = %(step)s::int)
    AND (%(lo)s::int IS NULL OR (coalesce(row_last, row_first) >= %(lo)s::int AND row_first <= %(hi)s::int));

-- name: redrive_not_run
UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
    done_at = NULL
WHERE task = %(task)s AND state = 'done' AND status = 'not_run' AND %(not_run)s = 1
    AND (%(step)s::int IS NULL OR num = %(step)s::int)
    AND (%(lo)s::int IS NULL OR (coalesce(row_last, row_first) >= %(lo)s::int AND row_first <= %(hi)s::int));

-- name: redrive_in_doubt
UPDATE work SET state = 'doubt', runner = NULL, doubt = NULL
WHERE task = %(task)s AND state = 'done' AND status = 'in_doubt' AND %(in_doubt)s = 1
    AND (%(step)s::int IS NULL OR num = %(step)s::int)
    AND (%(lo)s::int IS NULL OR (coalesce(row_last, row_first) >= %(lo)s::int AND row_first <= %(hi)s::int));

-- name: redrive_task
UPDATE tasks SET runs = runs + 1, again = runs + 1, status = 'running', finished = NULL, halted = NULL,
    shared = shared || jsonb_build_object('in_doubt', %(in_doubt_policy)s::text) WHERE id = %(task)s;

-- name: join_live_run
UPDATE tasks SET runs = runs + 1, status = 'running', finished = NULL WHERE id = %(task)s;

-- name: pace
-- The next slot of a rate bucket reserved (WorkStore.pace), on the database's clock: the
-- bucket's new tat, and the clock it was read at.
WITH now AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS s)
INSERT INTO buckets (task, name, tat) SELECT %(task)s, %(name)s, now.s + %(interval)s FROM now
ON CONFLICT (task, name) DO UPDATE SET tat = greatest(buckets.tat, (SELECT s FROM now)) + %(interval)s
RETURNING tat, (SELECT s FROM now);

-- name: hold
-- A bucket held until a time (WorkStore.hold), on the database's clock: its tat, never earlier
-- than it was.
WITH now AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS s)
INSERT INTO buckets (task, name, tat) SELECT %(task)s, %(name)s, now.s + %(seconds)s FROM now
ON CONFLICT (task, name) DO UPDATE SET tat = greatest(buckets.tat, (SELECT s FROM now) + %(seconds)s);

-- name: held
SELECT tat - extract(epoch FROM clock_timestamp())::float8 FROM buckets WHERE task = %s AND name = %s;

-- name: budget_counts
-- What an error budget counts (pool/budget.py), a row a step: its planned calls (not those beyond
-- the task's sample), and those of its calls that failed and that are in doubt.
SELECT num, count(*) FILTER (WHERE kind = 'call' AND state <> 'beyond'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'in_doubt')
FROM work WHERE task = %s GROUP BY num;
