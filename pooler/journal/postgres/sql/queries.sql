-- The PostgreSQL journal's queries, by name (pooler/journal/queries.py reads them). The tables and
-- functions are made by the numbered files of migrations/. The same names, columns and parameters
-- as the SQLite journal's: the one implementation (pooler/journal/tasks.py, claims.py) runs both.

-- Tasks

-- name: calls_of_task
-- Every record of a task, oldest first, as SQLite's history has them (a look at the journal): the
-- entry as its text, kept whole (no detail apart), the times in milliseconds, no round.
SELECT run, num, row, key, NULL::integer AS round, step_id, status, in_doubt, sent_ms AS sent_at,
       done_ms AS done_at, entry::text AS result, NULL::text AS detail
FROM calls WHERE task = %(task)s ORDER BY id;

-- name: tasks
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run,
       NULL AS store, unchanged
FROM tasks ORDER BY created DESC, id DESC LIMIT %(limit)s;

-- name: task
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run,
       NULL AS store, unchanged
FROM tasks WHERE id = %(task)s;

-- name: last_unfinished
SELECT id FROM tasks WHERE pool_file = %(pool)s AND status <> 'completed' ORDER BY created DESC, id DESC LIMIT 1;

-- name: answer
-- The answer is kept as its text (as the runner wrote it): read as JSON.
SELECT answer::json AS answer FROM tasks WHERE id = %(task)s;

-- name: finish_task
UPDATE tasks SET finished = %(finished)s, status = %(status)s, total = %(total)s, succeeded = %(succeeded)s,
                 failed = %(failed)s, skipped = %(skipped)s, not_run = %(not_run)s, answer = %(answer)s,
                 unchanged = %(unchanged)s
WHERE id = %(task)s;

-- name: task_doc
SELECT shared FROM tasks WHERE id = %(task)s;

-- name: create_task
-- A runner that creates the task at the same moment waits here until this one's plan commits
-- (then it finds the task) or is rolled back (then it plans the task itself). Its document is set
-- once the plan is written, in the same transaction.
INSERT INTO tasks (id, pool_file, started) VALUES (%(task)s, %(pool_file)s, %(started)s)
ON CONFLICT (id) DO NOTHING;

-- name: skip_landed_in_scope
-- A new task's calls whose key another task of its scope (the MCP server's session) has landed:
-- skipped, with that call's outcome, as a key an earlier run landed is on SQLite. Arguments: the
-- scope, the task, the task.
UPDATE work w SET state = 'done', status = 'skipped', runner = NULL, step_id = e.step_id, detail = e.detail,
                  entry = pooler_entry_with(e.entry, json_build_object('status', 'skipped')),
                  done_run = (SELECT runs FROM tasks WHERE id = w.task), done_at = now()
FROM (SELECT DISTINCT ON (d.key_text) d.key_text, d.entry, d.detail, d.step_id
      FROM work d JOIN tasks t ON t.id = d.task
      WHERE t.shared ->> 'key_scope' = %(scope)s AND d.task <> %(task)s AND d.state = 'done'
        AND d.status IN ('completed', 'skipped') AND d.key_text IS NOT NULL
      ORDER BY d.key_text, d.done_at DESC) e
WHERE w.task = %(task)s AND w.state = 'ready' AND w.key_text = e.key_text;

-- name: analyze_work
-- After a plan is written: the query planner needs to know how many calls there are to pick the indexes.
ANALYZE work;

-- name: lock_task_doc
-- The task's row held while its plan is widened: a second runner widening it waits, then sees
-- the sample widened already.
SELECT shared FROM tasks WHERE id = %(task)s FOR UPDATE;

-- name: set_task_doc
-- What the task keeps of its pool and plan, replaced (merged with what it kept by the caller, under lock_task_doc).
UPDATE tasks SET shared = %(doc)s WHERE id = %(task)s;

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
UPDATE runners SET lease_until = now() WHERE id IN (SELECT json_array_elements_text(%(ids)s));

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

-- A run again's steps over a table of a step it sends again (pooler.journal.work.plan_again),
-- in the transaction of the run again, under its task lock.

-- name: step_open
SELECT count(*) AS n FROM work WHERE task = %(task)s AND num = %(num)s AND state NOT IN ('done', 'beyond');

-- name: drop_open_calls
DELETE FROM work WHERE task = %(task)s AND num = %(num)s AND kind = 'call' AND state IN ('ready', 'beyond');

-- name: has_placeholder
SELECT count(*) AS n FROM work WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s;

-- name: drop_open_tables
DELETE FROM table_rows t WHERE t.task = %(task)s AND NOT EXISTS (SELECT 1 FROM work w
    WHERE w.task = t.task AND w.num = t.num AND w.idx = t.idx AND w.state = 'done');

-- name: landed
-- A call of the key that completed in the run the task is in: its entry and detail.
SELECT entry, detail, false AS split FROM work
WHERE task = %(task)s AND key_text = %(key)s AND state = 'done' AND status = 'completed'
  AND done_run >= (SELECT again FROM tasks WHERE id = %(task)s)
ORDER BY num, idx LIMIT 1;

-- name: kept_keys
-- The keys of the calls a step holds (done, in doubt, or in flight): its placeholder made again
-- leaves them out.
SELECT DISTINCT key_text FROM work WHERE task = %(task)s AND num = %(num)s AND kind = 'call' AND key_text IS NOT NULL;

-- The plan

-- name: plan_counts
-- The task's calls by status (a chunk of 500 rows is one call, as the run counts it; NULL: no plan).
-- A call sent whose answer is not recorded is in doubt, as is one a run again left to its runners'
-- rule (state doubt); a placeholder of a step over a table
-- counts once it is done (its step could not read the table).
SELECT nullif(count(*), 0) AS planned,
       count(*) FILTER (WHERE state = 'done' AND status = 'completed') AS completed,
       count(*) FILTER (WHERE state = 'done' AND status = 'failed') AS failed,
       count(*) FILTER (WHERE state IN ('sent', 'doubt') OR (state = 'done' AND status = 'in_doubt')) AS in_doubt,
       count(*) FILTER (WHERE state = 'done' AND status = 'skipped') AS skipped
FROM work WHERE task = %(task)s AND (kind = 'call' OR state = 'done');

-- name: planned_steps
-- What the plan holds of each step: its rows, the idx its next call takes, whether the placeholder
-- of a step over a table is still there.
SELECT num, coalesce(sum(size) FILTER (WHERE kind = 'call'), 0) AS held,
       coalesce(max(idx) FILTER (WHERE kind = 'call') + 1, 0) AS next_idx, bool_or(kind = 'expand') AS placeholder
FROM work WHERE task = %(task)s GROUP BY num;

-- The work of a task, as one runner sees it (work.py). A work row is read as its columns
-- num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text,
-- step_id (WorkRow's fields); a claimed one also gives its epoch when the claim moved it to sent.

-- name: lock_task
-- The task's lock. A transaction that changes a task's work and then takes a lock a run again or
-- a claim holds (this one, the task's row) takes this first: a run again holds both while it
-- changes work rows, and locks taken in the other order deadlock with it.
SELECT pg_advisory_xact_lock(hashtext(%(task)s));

-- name: unclaim_gone
UPDATE work SET state = 'ready', runner = NULL
WHERE task = %(task)s AND state = 'claimed' AND runner IN (SELECT json_array_elements_text(%(runners)s));

-- name: in_doubt_to_rule
-- Calls sent by gone runners (expired: true) and calls a run again left in doubt (false), with the
-- seconds since their request left.
SELECT num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text, step_id,
       extract(epoch FROM clock_timestamp() - sent_at)::float8 AS age, state = 'sent' AS expired
FROM work WHERE task = %(task)s
  AND (state = 'doubt' OR state = 'sent' AND runner IN (SELECT json_array_elements_text(%(runners)s)));

-- name: send_again
-- A call in doubt sent again under its same key and round, naming the call it repeats.
UPDATE work SET state = 'ready', runner = NULL, doubted = %(doubted)s, status = NULL, entry = NULL, detail = NULL,
                doubt = NULL, done_at = NULL
WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s;

-- name: forget_runners
DELETE FROM runners WHERE id IN (SELECT json_array_elements_text(%(runners)s));

-- name: blocked
-- Ready calls of a step that refers to one that did not complete, with the first such step and
-- its status (in doubt before the others).  The steps with ready calls are found by a seek each
-- (their first ready call's number and index, read from work_open), and weighed once a step, on
-- that call (every call of a step refers to the same steps), against work_failed: a task of a
-- million ready calls is not read whole each time a runner tidies, only the calls of a step that
-- cannot run.
WITH RECURSIVE steps(num, idx) AS (
    (SELECT num, idx FROM work WHERE task = %(task)s AND state = 'ready' ORDER BY num, idx LIMIT 1)
    UNION ALL
    SELECT x.num, x.idx FROM steps
    CROSS JOIN LATERAL (SELECT y.num, y.idx FROM work y WHERE y.task = %(task)s AND y.state = 'ready'
                        AND y.num > steps.num ORDER BY y.num, y.idx LIMIT 1) x),
stuck AS (
    SELECT steps.num, steps.idx, b.num AS blocked_num, b.status AS blocked_status FROM steps
    CROSS JOIN LATERAL (SELECT f.deps FROM work f WHERE f.task = %(task)s AND f.num = steps.num
                        AND f.idx = steps.idx LIMIT 1) h
    CROSS JOIN LATERAL (SELECT dep.num, d.status FROM unnest(h.deps) AS dep(num)
                        CROSS JOIN LATERAL (SELECT d.status FROM work d WHERE d.task = %(task)s AND d.num = dep.num
                                              AND d.state = 'done' AND d.status NOT IN ('completed', 'skipped')
                                            ORDER BY d.status = 'in_doubt' DESC LIMIT 1) d
                        ORDER BY dep.num LIMIT 1) b
    WHERE h.deps <> '{}')
SELECT w.num, w.idx, w.kind, w.row_first, w.row_last, w.size, w.data, w.deps, w.serial, w.round, w.doubted,
       w.key_text, w.step_id, stuck.blocked_num, stuck.blocked_status
FROM stuck JOIN work w ON w.task = %(task)s AND w.state = 'ready' AND w.num = stuck.num AND w.idx >= stuck.idx
FOR UPDATE OF w SKIP LOCKED;

-- name: end_call
-- A call ended without being sent (ruled in doubt, or its step cannot run).
UPDATE work SET state = 'done', runner = NULL, status = %(status)s, entry = %(entry)s, doubt = %(doubt)s,
                done_at = clock_timestamp(), done_run = (SELECT runs FROM tasks WHERE id = work.task)
WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s;

-- name: not_sent
-- A call claimed (perhaps moved to sent with its claim) from which no request left.
UPDATE work SET sent_at = NULL
WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s AND runner = %(runner)s AND state IN ('claimed', 'sent');

-- name: task_halted
SELECT halted FROM tasks WHERE id = %(task)s;

-- name: halt_task
UPDATE tasks SET halted = coalesce(halted, %(reason)s) WHERE id = %(task)s;

-- name: gate
-- claimed -> sent, only while the runner's lease is alive and the task not halted (see WorkStore.gate).
WITH t AS (SELECT halted FROM tasks WHERE id = %(task)s FOR SHARE)
UPDATE work SET state = 'sent', sent_at = clock_timestamp(), key_text = %(key)s, step_id = %(step_id)s,
                round = %(round)s, epoch = nextval('pooler_epoch'), serial = coalesce(%(serial)s, serial)
WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s AND runner = %(runner)s
  AND (state = 'claimed' OR state = 'sent' AND epoch = %(claimed)s)
  AND EXISTS (SELECT 1 FROM t WHERE halted IS NULL)
  AND EXISTS (SELECT 1 FROM runners WHERE id = %(runner)s AND lease_until > now())
RETURNING epoch;

-- name: serial_busy
-- Another call of the task with this serialize_on value claimed or sent: a call whose value a
-- reference gave waits for it (migration 0008), read under the task's lock.
SELECT count(*) AS n FROM work WHERE task = %(task)s AND serial = %(serial)s AND state IN ('claimed', 'sent')
  AND NOT (num = %(num)s AND idx = %(idx)s);

-- name: release_call
UPDATE work SET state = 'ready', runner = NULL
WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s AND runner = %(runner)s AND state IN ('claimed', 'sent');

-- name: done_now
-- A call whose outcome halted the task is done once the halt holds.
UPDATE work SET done_at = clock_timestamp() WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s;

-- name: keep_table_rows
INSERT INTO table_rows (task, num, idx, name, prefix, into_job, rows)
VALUES (%(task)s, %(num)s, %(idx)s, %(name)s, %(prefix)s, %(into)s, %(rows)s)
ON CONFLICT (task, num, idx, name) DO UPDATE SET rows = excluded.rows;

-- name: take_placeholder
DELETE FROM work WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s AND runner = %(runner)s AND state = 'claimed';

-- name: open_counts
-- Calls ready, calls claimed, sent or left in doubt (by anyone), and why the task halted; the calls
-- planned beyond the task's sample are neither. Each count is a range of the index of open calls:
-- the 999,999 calls beyond a sample of one are not read.
SELECT (SELECT count(*) FROM work WHERE task = %(task)s AND state = 'ready') AS ready,
       (SELECT count(*) FROM work WHERE task = %(task)s AND state IN ('claimed', 'sent', 'doubt')) AS held,
       (SELECT halted FROM tasks WHERE id = %(task)s) AS halted;

-- name: details
-- The detail each step gives references: that of its last call that completed.
SELECT DISTINCT ON (num) num, detail FROM work
WHERE task = %(task)s AND num IN (SELECT (json_array_elements_text(%(nums)s))::int) AND status IN ('completed', 'skipped')
ORDER BY num, idx DESC;

-- name: table_names
SELECT DISTINCT name FROM table_rows WHERE task = %(task)s AND num = %(num)s ORDER BY name;

-- name: table_parts
SELECT rows FROM table_rows WHERE task = %(task)s AND num = %(num)s AND name = %(name)s ORDER BY idx;

-- name: insert_work
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
       (extract(epoch FROM sent_at) * 1000)::bigint AS sent_ms, (extract(epoch FROM done_at) * 1000)::bigint AS done_ms,
       state = 'done' AND (done_run IS NULL OR done_run < (SELECT again FROM tasks WHERE id = %(task)s)) AS earlier,
       key_text, row_first, row_last
FROM work WHERE task = %(task)s AND state <> 'beyond' ORDER BY num, idx;

-- name: answer_state
SELECT shared, status, answer IS NULL AS unanswered FROM tasks WHERE id = %(task)s;

-- A task's report (history.py)

-- name: record_run
INSERT INTO task_runs (task, run, store, mode, width, serialize_on, steps, again)
SELECT id, again, %(store)s, %(mode)s, %(width)s, %(serialize_on)s, %(steps)s, %(again)s FROM tasks WHERE id = %(task)s
ON CONFLICT (task, run) DO NOTHING;

-- name: record_flow
-- One runner's flow control in the run the task is in (the journal's run, not the doc's).
INSERT INTO flows (task, run, runner, doc) SELECT id, again, %(runner)s, %(doc)s FROM tasks WHERE id = %(task)s;

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
WHERE task = %(task)s AND id IN (SELECT json_array_elements_text(%(ids)s)::bigint);

-- name: report_table_entries
SELECT entry FROM calls WHERE task = %(task)s AND run = %(run)s AND status = 'completed'
  AND entry::text LIKE '%%"tables":{"%%';

-- A sampled task widened (journal.py)

-- name: cut_by_sample
-- The chunks planned beyond the sample that a wider sample of %s rows cuts.
SELECT num, idx, row_first, data FROM work
WHERE task = %(task)s AND state = 'beyond' AND row_last IS NOT NULL AND row_first < %(sample)s AND row_last >= %(sample)s;

-- name: make_room_out
-- The calls of a step after idx moved one on, in two statements (a key is checked row by row):
-- first out of the way, to -(idx + 1) - 1 (below the placeholder's -1), then back, one on.
UPDATE work SET idx = -idx - 2 WHERE task = %(task)s AND num = %(num)s AND idx > %(idx)s;

-- name: make_room_back
UPDATE work SET idx = -idx - 1 WHERE task = %(task)s AND num = %(num)s AND idx < -1;

-- name: drop_call
DELETE FROM work WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s;

-- name: release_beyond
-- The calls the wider sample (NULL: every row) holds, released to be claimed.
UPDATE work SET state = 'ready' WHERE task = %(task)s AND state = 'beyond' AND (%(sample)s::int IS NULL OR row_first < %(sample)s);

-- name: planned_calls
SELECT count(*) AS n FROM work WHERE task = %(task)s AND state <> 'beyond';

-- name: task_runs
SELECT runs FROM tasks WHERE id = %(task)s;

-- --replan of a shared task (replan.py)

-- name: step_calls
SELECT idx, state, status, key_text, data, round FROM work
WHERE task = %(task)s AND num = %(num)s AND kind = 'call' ORDER BY idx;

-- name: drop_calls
DELETE FROM work WHERE task = %(task)s AND num = %(num)s AND idx IN (SELECT (json_array_elements_text(%(idxs)s))::int);

-- name: set_round
UPDATE work SET round = %(round)s WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s;

-- name: table_rows_of_task
-- Every table part the task's calls gave, for pooler gather: each table's parts in call order.
SELECT num, idx, name, prefix, into_job, rows FROM table_rows WHERE task = %(task)s ORDER BY num, name, idx;

-- A redrive (pooler.journal.work.redrive_again), in the transaction that begins it, under the
-- task's lock, as a run again takes it. Each takes the task, what it sends
-- again (failed, in_doubt, not_run: 1 or 0) and its scope (step: a step number or NULL; lo, hi:
-- the rows a call must touch, or NULL). The calls it does not send are set aside first (not run,
-- in doubt), so the ones it puts back are not.

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

-- name: again_task
UPDATE tasks SET runs = runs + 1, again = runs + 1, status = 'running', finished = NULL, halted = NULL
WHERE id = %(task)s;

-- name: join_live_run
UPDATE tasks SET runs = runs + 1, status = 'running', finished = NULL WHERE id = %(task)s;

-- name: pace
-- The next slot of a rate bucket reserved (WorkStore.pace), on the database's clock: the
-- bucket's new tat, and the clock it was read at.
WITH now AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS s)
INSERT INTO buckets (task, name, tat) SELECT %(task)s, %(name)s, now.s + %(interval)s FROM now
ON CONFLICT (task, name) DO UPDATE SET tat = greatest(buckets.tat, (SELECT s FROM now)) + %(interval)s
RETURNING tat, (SELECT s FROM now) AS now;

-- name: hold
-- A bucket held until a time (WorkStore.hold), on the database's clock: its tat, never earlier
-- than it was.
WITH now AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS s)
INSERT INTO buckets (task, name, tat) SELECT %(task)s, %(name)s, now.s + %(seconds)s FROM now
ON CONFLICT (task, name) DO UPDATE SET tat = greatest(buckets.tat, (SELECT s FROM now) + %(seconds)s);

-- name: held
SELECT tat - extract(epoch FROM clock_timestamp())::float8 AS left FROM buckets WHERE task = %(task)s AND name = %(name)s;

-- name: budget_counts
-- What an error budget counts (pool/budget.py), a row a step: its planned calls (not those beyond
-- the task's sample), and those of its calls that failed and that are in doubt.
SELECT num, count(*) FILTER (WHERE kind = 'call' AND state <> 'beyond') AS planned,
       count(*) FILTER (WHERE status = 'failed') AS failed, count(*) FILTER (WHERE status = 'in_doubt') AS in_doubt
FROM work WHERE task = %(task)s GROUP BY num;

-- name: again_failed
-- Failed: ready under the next key round, or under the same one when the store carried it out and
-- only its tables could not be written (result true).
UPDATE work SET state = 'ready', runner = NULL, doubted = NULL,
    round = CASE WHEN (entry ->> 'result') = 'true' THEN round ELSE round + 1 END,
    status = NULL, entry = NULL, detail = NULL, doubt = NULL, sent_at = NULL, done_at = NULL
WHERE task = %(task)s AND state = 'done' AND status = 'failed';

-- name: again_not_run
UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
    done_at = NULL
WHERE task = %(task)s AND state = 'done' AND status = 'not_run';

-- name: again_unkeyed
-- Completed without a key: nothing tells it apart from a new call, so it is sent again.
UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
    sent_at = NULL, done_at = NULL
WHERE task = %(task)s AND state = 'done' AND status = 'completed' AND key_text IS NULL AND kind = 'call';

-- name: again_in_doubt
-- In doubt: left to the rule of the runner that tidies the task first, by the new run's --in-doubt.
UPDATE work SET state = 'doubt', runner = NULL, doubt = NULL
WHERE task = %(task)s AND state = 'done' AND status = 'in_doubt';

-- name: one_call_a_step
-- Whether every step of the task is one call, none planned as it runs (claims.py): read up to the
-- first row of another kind or second call of a step (a step over rows has one at its second row).
SELECT NOT EXISTS (SELECT 1 FROM work WHERE task = %(task)s AND (idx > 0 OR kind <> 'call')) AS one;

-- name: claim_state
-- What a claim weighs, in one statement, under the task's lock: whether the task is there and why
-- it halted (its row read FOR SHARE: a halt waits for the calls this claim moves to sent, or is seen
-- by it), the calls claimed or in flight across every runner and those of this runner, whether its
-- lease is alive, and how many runners the task has (one alone takes the whole cap).  The epochs
-- come from the sequence pooler_epoch as the calls are taken.
WITH t AS (SELECT halted FROM tasks WHERE id = %(task)s FOR SHARE)
SELECT EXISTS (SELECT 1 FROM t) AS there, (SELECT halted FROM t) AS halted,
       count(*) AS busy, count(*) FILTER (WHERE runner = %(runner)s) AS mine,
       EXISTS (SELECT 1 FROM runners WHERE id = %(runner)s AND lease_until > clock_timestamp()) AS leased,
       (SELECT count(*) FROM runners WHERE task = %(task)s) AS runners, NULL::bigint AS epoch
FROM work WHERE task = %(task)s AND state IN ('claimed', 'sent');

-- name: claimable
-- The first ready calls in file order whose steps referred to have completed and whose
-- serialize_on value has no earlier call not done; and whether the plan holds each one's key.
SELECT w.num, w.idx, w.kind, w.row_first, w.row_last, w.size, w.data, w.deps, w.serial, w.round, w.doubted, w.key_text, w.step_id, w.key_planned
FROM work w WHERE w.task = %(task)s AND w.state = 'ready'
  AND (w.deps = '{}' OR NOT EXISTS (SELECT 1 FROM unnest(w.deps) AS dep(num)
       CROSS JOIN LATERAL ((SELECT 1 FROM work d WHERE d.task = w.task AND d.state IN ('ready', 'claimed', 'sent', 'doubt')
                            AND d.num = dep.num LIMIT 1)
                           UNION ALL
                           (SELECT 1 FROM work d WHERE d.task = w.task AND d.num = dep.num AND d.state = 'done'
                            AND d.status NOT IN ('completed', 'skipped') LIMIT 1)) d))
  AND (w.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = w.task
       AND s.serial = w.serial AND ((s.num, s.idx) < (w.num, w.idx) AND s.state NOT IN ('done', 'beyond')
                                    OR s.state IN ('claimed', 'sent'))))
ORDER BY w.num, w.idx LIMIT %(take)s FOR UPDATE SKIP LOCKED;

-- name: claim_next
-- What a claim of one call weighs (claim_state) with the first call that may go (claimable, taking
-- one) beside it, in one statement: a sequential claim reads both at once. When no call may go,
-- the columns of claimable are NULL.
SELECT * FROM ({{claim_state}}) s LEFT JOIN ({{claimable}}) c ON true;

-- name: claimable_heads
-- The first claimable call of each step whose steps referred to have completed, the steps with
-- the fewest calls claimed or sent first (then file order): the claim takes these before the rest
-- in file order, so a step waits only for the steps it refers to, never for the rows of a step
-- before it.  The steps are found by a seek each, the first %(window)s steps with ready calls only (a
-- claim costs the same whatever the pool's steps), with their first ready call's number and index
-- read from work_open (never by walking the calls of a step done already); deps are those of every
-- row of a step, so they are weighed once a step, on that call.
WITH RECURSIVE steps(num, idx, n) AS (
    (SELECT num, idx, 1 FROM work WHERE task = %(task)s AND state = 'ready' ORDER BY num, idx LIMIT 1)
    UNION ALL
    SELECT x.num, x.idx, steps.n + 1 FROM steps
    CROSS JOIN LATERAL (SELECT y.num, y.idx FROM work y WHERE y.task = %(task)s AND y.state = 'ready'
                        AND y.num > steps.num ORDER BY y.num, y.idx LIMIT 1) x
    WHERE steps.n < %(window)s)
SELECT w.num, w.idx, w.kind, w.row_first, w.row_last, w.size, w.data, w.deps, w.serial, w.round, w.doubted, w.key_text, w.step_id, w.key_planned
FROM steps
CROSS JOIN LATERAL (SELECT f.deps FROM work f WHERE f.task = %(task)s AND f.num = steps.num AND f.idx = steps.idx
                    LIMIT 1) h
CROSS JOIN LATERAL (SELECT x.* FROM work x WHERE x.task = %(task)s AND x.state = 'ready' AND x.num = steps.num
                    AND x.idx >= steps.idx
                    AND (x.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = x.task
                         AND s.serial = x.serial AND ((s.num, s.idx) < (x.num, x.idx)
                                                      AND s.state NOT IN ('done', 'beyond')
                                                      OR s.state IN ('claimed', 'sent'))))
                    ORDER BY x.idx LIMIT 1) w
WHERE h.deps = '{}' OR NOT EXISTS (SELECT 1 FROM unnest(h.deps) AS dep(num)
       CROSS JOIN LATERAL ((SELECT 1 FROM work d WHERE d.task = %(task)s AND d.state IN ('ready', 'claimed', 'sent', 'doubt')
                            AND d.num = dep.num LIMIT 1)
                           UNION ALL
                           (SELECT 1 FROM work d WHERE d.task = %(task)s AND d.num = dep.num AND d.state = 'done'
                            AND d.status NOT IN ('completed', 'skipped') LIMIT 1)) d)
ORDER BY (SELECT count(*) FROM work b WHERE b.task = %(task)s AND b.num = steps.num
          AND b.state IN ('claimed', 'sent')), steps.num
LIMIT %(take)s;

-- name: take_calls
-- The calls a claim takes (%(calls)s, a JSON array of num, idx, and whether it is moved to sent with
-- its step id, as the gate would; else claimed): the epochs they were given (pooler_epoch).
UPDATE work w SET runner = %(runner)s,
    state = CASE WHEN c.sent THEN 'sent' ELSE 'claimed' END,
    sent_at = CASE WHEN c.sent THEN clock_timestamp() ELSE w.sent_at END,
    step_id = CASE WHEN c.sent THEN c.step_id ELSE w.step_id END,
    epoch = CASE WHEN c.sent THEN nextval('pooler_epoch') ELSE w.epoch END
FROM json_to_recordset(%(calls)s) AS c(num int, idx int, sent boolean, step_id text)
WHERE w.task = %(task)s AND w.num = c.num AND w.idx = c.idx
RETURNING w.num, w.idx, w.epoch;

-- name: take_call
-- The one call a claim takes (take_calls of a single call, the claim of a sequential run), found by
-- its key: a join with a one-row list would walk the task's calls. Its epoch, as take_calls gives.
UPDATE work SET runner = %(runner)s,
    state = CASE WHEN %(sent)s THEN 'sent' ELSE 'claimed' END,
    sent_at = CASE WHEN %(sent)s THEN clock_timestamp() ELSE sent_at END,
    step_id = CASE WHEN %(sent)s THEN %(step_id)s ELSE step_id END,
    epoch = CASE WHEN %(sent)s THEN nextval('pooler_epoch') ELSE epoch END
WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s
RETURNING num, idx, epoch;

-- name: done_call
-- A call's outcome, recorded only while this runner still holds it, and its record joining the
-- history (as record_call does), in one statement: one round trip, not two. Its row is the
-- record written: none when the call was no longer this runner's.
WITH d AS (
    UPDATE work SET state = 'done', status = %(status)s, entry = %(entry)s, detail = %(detail)s,
        doubt = %(doubt)s, key_text = %(key)s, step_id = %(step_id)s, done_at = clock_timestamp(),
        done_run = (SELECT runs FROM tasks WHERE id = work.task)
    WHERE task = %(task)s AND num = %(num)s AND idx = %(idx)s AND runner = %(runner)s
      AND state IN ('claimed', 'sent')
    RETURNING task, num, idx, row_first, key_text, step_id, status, doubt, runner, serial, sent_at, done_at, entry)
INSERT INTO calls (task, run, num, idx, row, key, step_id, status, in_doubt, runner, serial, sent_ms, done_ms,
                   entry)
SELECT d.task, t.again, d.num, d.idx, d.row_first, d.key_text, d.step_id, d.status,
       coalesce(d.doubt = 'skipped', false), d.runner, d.serial, (extract(epoch FROM d.sent_at) * 1000)::bigint,
       (extract(epoch FROM d.done_at) * 1000)::bigint, d.entry
FROM d JOIN tasks t ON t.id = d.task
RETURNING num;

-- name: record_call
-- The record of a call just done joins the history (calls, one record an attempt), in the run the
-- task is in; sent_ms only for a call that was sent (%(sent)s).
INSERT INTO calls (task, run, num, idx, row, key, step_id, status, in_doubt, runner, serial, sent_ms, done_ms,
                   entry)
SELECT w.task, t.again, w.num, w.idx, w.row_first, w.key_text, w.step_id, w.status,
       coalesce(w.doubt = 'skipped', false), w.runner, w.serial,
       CASE WHEN %(sent)s THEN (extract(epoch FROM w.sent_at) * 1000)::bigint END,
       (extract(epoch FROM w.done_at) * 1000)::bigint, w.entry
FROM work w JOIN tasks t ON t.id = w.task WHERE w.task = %(task)s AND w.num = %(num)s AND w.idx = %(idx)s;

-- name: compare_put
-- The rows of a compare (journal/comparerows.py), in this order: scope, num, side (0 the
-- store's, 1 the file's), the row number, the match text and the digest.
COPY compare_rows (scope, num, side, idx, match, digest) FROM STDIN;

-- name: compare_sent
-- The file's rows that are sent, by row number: new (no table row matches) or changed (no table
-- row that matches has the same digest). The others are unchanged.
SELECT f.idx AS idx, CASE WHEN NOT EXISTS (SELECT 1 FROM compare_rows s WHERE s.scope = f.scope AND s.num = f.num
                                     AND s.side = 0 AND s.match = f.match) THEN 'new' ELSE 'changed' END AS kind
FROM compare_rows f
WHERE f.scope = %(scope)s AND f.num = %(num)s AND f.side = 1
  AND NOT EXISTS (SELECT 1 FROM compare_rows s WHERE s.scope = f.scope AND s.num = f.num AND s.side = 0
                  AND s.match = f.match AND s.digest = f.digest);

-- name: compare_clear
DELETE FROM compare_rows WHERE scope = %(scope)s;

-- name: store_bucket_make
-- A store's bucket (journal/storerate.py), made empty the first time a task calls the store.
INSERT INTO store_buckets (store, tat, slots) VALUES (%(store)s, 0, 0) ON CONFLICT (store) DO NOTHING;

-- name: store_bucket_read
-- Its row locked until the transaction that sets it again ends, which orders the runners of
-- every host.
SELECT tat FROM store_buckets WHERE store = %(store)s FOR UPDATE;

-- name: store_clock
-- The database's clock, read once the bucket's lock is held.
SELECT extract(epoch FROM clock_timestamp())::float8 AS now;

-- name: store_share_read
-- A task's share's tat, and how many other tasks, calling the store lately, want more of it.
SELECT (SELECT tat FROM store_shares WHERE store = %(store)s AND task = %(task)s) AS tat,
       (SELECT count(*) FROM store_shares WHERE store = %(store)s AND task <> %(task)s
        AND last >= %(now)s - %(window)s AND hungry >= %(now)s) AS others;

-- name: store_share_take
INSERT INTO store_shares (store, task, tat, last, hungry) VALUES (%(store)s, %(task)s, %(share)s, %(at)s, 0)
ON CONFLICT (store, task) DO UPDATE SET tat = %(share)s, last = greatest(store_shares.last, %(at)s);

-- name: store_bucket_take
UPDATE store_buckets SET tat = %(tat)s, slots = slots + 1 WHERE store = %(store)s RETURNING slots;

-- name: store_share_slot
-- The task's slot in the store's bucket; when its call waited for it, it wants more of the store.
UPDATE store_shares SET last = greatest(last, %(at)s),
    hungry = CASE WHEN %(waited)s THEN %(hungry)s ELSE hungry END
WHERE store = %(store)s AND task = %(task)s;

-- name: store_shares_forget
-- The shares of tasks that stopped calling long ago.
DELETE FROM store_shares WHERE last < extract(epoch FROM clock_timestamp())::float8 - %(forget)s;
