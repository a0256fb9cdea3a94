-- The SQLite journal's queries, by name (pooler/journal/queries.py reads them). The tables are
-- made by the numbered files of migrations/; every query here reads or writes what they make.

-- Tasks

-- name: task_runs
SELECT runs FROM tasks WHERE id = :task;

-- name: task
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run, store,
       unchanged
FROM tasks WHERE id = :task;

-- name: tasks
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run, store,
       unchanged
FROM tasks ORDER BY started DESC, rowid DESC LIMIT :limit;

-- name: last_unfinished
SELECT id FROM tasks WHERE pool_file = :pool AND status != 'completed'
ORDER BY started DESC, rowid DESC LIMIT 1;

-- name: finish_task
UPDATE tasks SET finished = :finished, status = :status, total = :total, succeeded = :succeeded,
                 failed = :failed, skipped = :skipped, not_run = :not_run, answer = :answer,
                 unchanged = :unchanged
WHERE id = :task;

-- name: answer
SELECT answer FROM tasks WHERE id = :task;

-- Calls

-- name: calls_of_task
SELECT run, num, row, key, round, step_id, status, in_doubt, sent_at, done_at, result, detail
FROM calls WHERE task = :task ORDER BY id;

-- name: record_flow
-- One runner's flow control in the run the task is in (the journal's run, not the doc's).
INSERT INTO flows (task, run, runner, doc) SELECT id, again, :runner, :doc FROM tasks WHERE id = :task;

-- name: flows
SELECT run, doc FROM flows WHERE task = :task ORDER BY run, id;

-- A task's report (history.py)

-- name: report_runs
SELECT run, store, mode, width, serialize_on, steps, again FROM task_runs WHERE task = :task ORDER BY run;

-- name: report_calls
-- Every record, then the calls of a task planned as work rows that were sent and whose outcome is
-- not recorded (negative ids: no record), in the run the task is in.
SELECT * FROM (
    SELECT id, run, num, row, key, step_id, status, in_doubt, lane, serial, sent_ms, done_ms, sent_at, done_at
    FROM calls WHERE task = :task
    UNION ALL
    SELECT -row_number() OVER (ORDER BY w.num, w.idx), t.again, w.num, w.row_first, w.key_text, w.step_id,
           'sent', 0, NULL, w.serial, w.sent_ms, NULL, NULL, NULL
    FROM work w JOIN tasks t ON t.id = w.task WHERE w.task = :task AND w.state = 'sent')
ORDER BY id < 0, abs(id);

-- name: report_first_entries
SELECT num, result AS entry FROM calls WHERE id IN (SELECT MIN(id) FROM calls WHERE task = :task GROUP BY num);

-- name: report_entries
-- The ids come as one JSON array.
SELECT id, result AS entry FROM calls WHERE task = :task AND id IN (SELECT value FROM json_each(:ids));

-- name: report_table_entries
-- Picked in SQL, so that 100,000 calls without tables are not decoded for nothing.
SELECT result AS entry FROM calls WHERE task = :task AND run = :run AND status = 'completed'
  AND result LIKE '%"tables":{"%';

-- A task's plan as work rows (work.py, tasks.py, lease.py; pooler/journal/work.py tells the model).
-- Times are the runners' wall clock, given as arguments: seconds since the epoch for leases,
-- milliseconds for a call's sent_ms and done_ms. A list of values (runner ids, step numbers, idx)
-- comes as one JSON array. A work row is read as its columns num, idx, kind, row_first, row_last,
-- size, data, deps, serial, round, doubted, key_text, step_id (WorkRow's fields). A query of calls
-- not done says `state <> 'done'` too, though its other terms imply it: SQLite uses the partial
-- index work_open only for a query that holds the index's own term.

-- name: create_task
-- A task made with its plan (its document set once the plan is written, in the same transaction);
-- nothing when another runner made it first.
INSERT INTO tasks (id, pool_file, started) VALUES (:task, :pool_file, :started)
ON CONFLICT (id) DO NOTHING;

-- name: task_doc
SELECT shared FROM tasks WHERE id = :task;

-- name: set_task_doc
UPDATE tasks SET shared = :doc WHERE id = :task;

-- name: insert_work
-- The planner's values as PostgreSQL's COPY takes them: deps as an array's text (`{1,2}`), kept
-- here as a JSON array; made SQLite's in the statement, not by Python a row.
INSERT INTO work (task, num, idx, kind, row_first, row_last, size, data, deps, serial, key_text, key_planned,
                  state)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, '[' || trim(?, '{}') || ']', ?, ?, ?, ?);

-- name: planned_steps
-- What the plan holds of each step: its rows, the idx its next call takes, whether the placeholder
-- of a step over a table is still there.
SELECT num, coalesce(sum(size) FILTER (WHERE kind = 'call'), 0) AS held,
       coalesce(max(idx) FILTER (WHERE kind = 'call') + 1, 0) AS next_idx, max(kind = 'expand') AS placeholder
FROM work WHERE task = :task GROUP BY num;

-- name: planned_calls
-- The task's calls but those beyond its sample: two counts of index entries, not a read of every
-- call's row.
SELECT (SELECT count(*) FROM work WHERE task = :task)
       - (SELECT count(*) FROM work WHERE task = :task AND state = 'beyond' AND state <> 'done') AS n;

-- name: plan_counts
-- The task's calls by status (a chunk of 500 rows is one call, as the run counts it; NULL: no plan).
-- A call sent whose answer is not recorded is in doubt, as is one a run again left to its runners'
-- rule (state doubt); a placeholder of a step over a table counts once it is done.
SELECT nullif(count(*), 0) AS planned,
       count(*) FILTER (WHERE state = 'done' AND status = 'completed') AS completed,
       count(*) FILTER (WHERE state = 'done' AND status = 'failed') AS failed,
       count(*) FILTER (WHERE state IN ('sent', 'doubt') OR (state = 'done' AND status = 'in_doubt')) AS in_doubt,
       count(*) FILTER (WHERE state = 'done' AND status = 'skipped') AS skipped
FROM work WHERE task = :task AND (kind = 'call' OR state = 'done');

-- name: answer_rows
-- Every call of the task in file order (but those planned beyond its sample), when it was sent and
-- done (ms), whether it was done in an earlier run than the one the task is in, and its key and rows.
SELECT num, idx, kind, size, state, status, entry, doubt, doubted, step_id, detail, sent_ms, done_ms,
       state = 'done' AND (done_run IS NULL OR done_run < (SELECT again FROM tasks WHERE id = :task)) AS earlier,
       key_text, row_first, row_last
FROM work WHERE task = :task AND state <> 'beyond' ORDER BY num, idx;

-- name: answer_state
SELECT shared, status, answer IS NULL AS unanswered FROM tasks WHERE id = :task;

-- Runners and their leases (lease.py)

-- name: runners_of_task
-- Every runner of the task, whether its lease is alive (:now: seconds since the epoch).
SELECT id, host, pid, lease_until > :now AS leased, width, started FROM runners WHERE task = :task;

-- name: runners_left
-- Runners that left with calls they could not record (their row is gone).
SELECT DISTINCT runner FROM work w WHERE task = :task AND state IN ('claimed', 'sent') AND state <> 'done'
  AND NOT EXISTS (SELECT 1 FROM runners r WHERE r.id = w.runner);

-- name: end_leases
-- Runners killed on this machine: their leases end now, so their calls are taken back at once.
UPDATE runners SET lease_until = :now WHERE id IN (SELECT value FROM json_each(:ids));

-- name: forget_runners
DELETE FROM runners WHERE id IN (SELECT value FROM json_each(:runners));

-- name: take_lease
INSERT INTO runners (id, task, host, pid, started, lease_until, width)
VALUES (:id, :task, :host, :pid, :now, :now + :seconds, :width);

-- name: renew_lease
-- Only while the lease is alive: a runner whose calls were taken back never gets it again.
UPDATE runners SET lease_until = :now + :seconds WHERE id = :id AND lease_until > :now;

-- name: give_up_lease
DELETE FROM runners WHERE id = :id;

-- A task run again (tasks.py join): as pooler_run_again of the PostgreSQL journal's migration 0006.

-- name: join_live_run
-- A task some live runner holds is joined as it is.
UPDATE tasks SET runs = runs + 1, status = 'running', finished = NULL WHERE id = :task;

-- name: again_failed
-- Failed: ready under the next key round, or under the same one when the store carried it out and
-- only its tables could not be written (result true).
UPDATE work SET state = 'ready', runner = NULL, doubted = NULL,
    round = CASE WHEN status = 'failed' AND json_type(entry, '$.result') = 'true' THEN round ELSE round + 1 END,
    status = NULL, entry = NULL, detail = NULL, doubt = NULL, sent_ms = NULL, done_ms = NULL
WHERE task = :task AND state = 'done' AND status = 'failed';

-- name: again_not_run
UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
    done_ms = NULL
WHERE task = :task AND state = 'done' AND status = 'not_run';

-- name: again_unkeyed
-- Completed without a key: nothing tells it apart from a new call, so it is sent again.
UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
    sent_ms = NULL, done_ms = NULL
WHERE task = :task AND state = 'done' AND status = 'completed' AND key_text IS NULL AND kind = 'call';

-- name: again_in_doubt
-- In doubt: left to the rule of the runner that tidies the task first, by the new run's --in-doubt.
UPDATE work SET state = 'doubt', runner = NULL, doubt = NULL
WHERE task = :task AND state = 'done' AND status = 'in_doubt';

-- A run again's steps over a table of a step it sends again (pooler.journal.work.plan_again)

-- name: step_open
SELECT count(*) AS n FROM work WHERE task = :task AND num = :num AND state NOT IN ('done', 'beyond');

-- name: drop_open_calls
DELETE FROM work WHERE task = :task AND num = :num AND kind = 'call' AND state IN ('ready', 'beyond');

-- name: drop_open_tables
DELETE FROM table_rows WHERE task = :task AND NOT EXISTS (SELECT 1 FROM work w
    WHERE w.task = :task AND w.num = table_rows.num AND w.idx = table_rows.idx AND w.state = 'done');

-- name: again_task
UPDATE tasks SET runs = runs + 1, again = runs + 1, status = 'running', finished = NULL, halted = NULL
WHERE id = :task;

-- The work of a task as one runner sees it (work.py)

-- name: task_halted
SELECT halted FROM tasks WHERE id = :task;

-- name: one_call_a_step
-- Whether every step of the task is one call, none planned as it runs (claims.py): read up to the
-- first row of another kind or second call of a step (a step over rows has one at its second row).
SELECT NOT EXISTS (SELECT 1 FROM work WHERE task = :task AND (idx > 0 OR kind <> 'call')) AS one;

-- name: claim_state
-- What a claim weighs, in one statement: whether the task is there and why it halted, the calls
-- claimed or in flight across every runner and those of this runner, whether its lease is alive,
-- how many runners the task has (one alone takes the whole cap), and the last fencing epoch.
SELECT EXISTS (SELECT 1 FROM tasks WHERE id = :task) AS there, (SELECT halted FROM tasks WHERE id = :task) AS halted,
       count(*) AS busy, coalesce(sum(runner = :runner), 0) AS mine,
       EXISTS (SELECT 1 FROM runners WHERE id = :runner AND lease_until > :now) AS leased,
       (SELECT count(*) FROM runners WHERE task = :task) AS runners,
       (SELECT value FROM work_epoch WHERE id = 1) AS epoch
FROM work WHERE task = :task AND state IN ('claimed', 'sent') AND state <> 'done';

-- name: claimable
-- The first ready calls in file order whose steps referred to have completed and whose
-- serialize_on value has no earlier call not done; and whether the plan holds each one's key.  A
-- step referred to has not completed while a call of it is open (any state but done and beyond
-- its sample: work_open) or ended without completing (work_failed): a seek into each.
SELECT w.num, w.idx, w.kind, w.row_first, w.row_last, w.size, w.data, w.deps, w.serial, w.round, w.doubted,
       w.key_text, w.step_id, w.key_planned
FROM work w WHERE w.task = :task AND w.state = 'ready' AND w.state <> 'done'
  AND (w.deps = '[]' OR NOT EXISTS (SELECT 1 FROM json_each(w.deps) j
       WHERE EXISTS (SELECT 1 FROM work d WHERE d.task = w.task AND d.state IN ('ready', 'claimed', 'sent', 'doubt')
                     AND d.state <> 'done' AND d.num = j.value)
          OR EXISTS (SELECT 1 FROM work d WHERE d.task = w.task AND d.state = 'done'
                     AND d.status NOT IN ('completed', 'skipped') AND d.num = j.value)))
  AND (w.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = w.task AND s.serial = w.serial
       AND ((s.num, s.idx) < (w.num, w.idx) AND s.state NOT IN ('done', 'beyond')
            OR s.state IN ('claimed', 'sent'))))
ORDER BY w.num, w.idx LIMIT :take;

-- name: claim_next
-- What a claim of one call weighs (claim_state) with the first call that may go (claimable, taking
-- one) beside it, in one statement: a sequential claim reads both at once. When no call may go,
-- the columns of claimable are NULL.
SELECT * FROM ({{claim_state}}) s LEFT JOIN ({{claimable}}) c ON true;

-- name: claimable_heads
-- The first claimable call of each step whose steps referred to have completed, the steps with
-- the fewest calls claimed or sent first (then file order): the claim takes these before the rest
-- in file order, so a step waits only for the steps it refers to, never for the rows of a step
-- before it.  The steps are found by a seek each, the first :window steps with ready calls only (a
-- claim costs the same whatever the pool's steps); deps are those of every row of a step, so they
-- are weighed once a step, on its first ready row.
WITH RECURSIVE steps(num, n) AS (
    SELECT min(num), 1 FROM work WHERE task = :task AND state = 'ready' AND state <> 'done'
    UNION ALL
    SELECT (SELECT min(n.num) FROM work n WHERE n.task = :task AND n.state = 'ready' AND n.state <> 'done'
            AND n.num > steps.num), steps.n + 1
    FROM steps WHERE steps.num IS NOT NULL AND steps.n < :window),
heads(num, deps) AS (
    SELECT steps.num, (SELECT f.deps FROM work f WHERE f.task = :task AND f.state = 'ready' AND f.state <> 'done'
                       AND f.num = steps.num ORDER BY f.idx LIMIT 1)
    FROM steps WHERE steps.num IS NOT NULL)
SELECT w.num, w.idx, w.kind, w.row_first, w.row_last, w.size, w.data, w.deps, w.serial, w.round, w.doubted,
       w.key_text, w.step_id, w.key_planned
FROM heads JOIN work w ON w.task = :task AND w.state = 'ready' AND w.state <> 'done' AND w.num = heads.num
  AND w.idx = (SELECT x.idx FROM work x WHERE x.task = :task AND x.state = 'ready' AND x.state <> 'done'
               AND x.num = heads.num
               AND (x.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = x.task
                    AND s.serial = x.serial AND ((s.num, s.idx) < (x.num, x.idx) AND s.state NOT IN ('done', 'beyond')
                                                 OR s.state IN ('claimed', 'sent'))))
               ORDER BY x.idx LIMIT 1)
WHERE heads.deps = '[]' OR NOT EXISTS (SELECT 1 FROM json_each(heads.deps) j
      WHERE EXISTS (SELECT 1 FROM work d WHERE d.task = :task AND d.state IN ('ready', 'claimed', 'sent', 'doubt')
                    AND d.state <> 'done' AND d.num = j.value)
         OR EXISTS (SELECT 1 FROM work d WHERE d.task = :task AND d.state = 'done'
                    AND d.status NOT IN ('completed', 'skipped') AND d.num = j.value))
ORDER BY (SELECT count(*) FROM work b WHERE b.task = :task AND b.num = w.num AND b.state IN ('claimed', 'sent')
          AND b.state <> 'done'), w.num
LIMIT :take;

-- name: unclaim_gone
UPDATE work SET state = 'ready', runner = NULL
WHERE task = :task AND state = 'claimed' AND state <> 'done' AND runner IN (SELECT value FROM json_each(:runners));

-- name: in_doubt_to_rule
-- Calls sent by gone runners (expired: true) and calls a run again left in doubt (false), with the
-- seconds since their request left (?3: now, in milliseconds); the caller puts them in file order
-- (an ORDER BY here would make SQLite walk every call of the task).
SELECT num, idx, kind, row_first, row_last, size, data, deps, serial, round, doubted, key_text, step_id,
       (:now_ms - sent_ms) / 1000.0 AS age, state = 'sent' AS expired
FROM work WHERE task = :task AND state IN ('doubt', 'sent') AND state <> 'done'
  AND (state = 'doubt' OR runner IN (SELECT value FROM json_each(:runners)));

-- name: send_again
-- A call in doubt sent again under its same key and round, naming the call it repeats.
UPDATE work SET state = 'ready', runner = NULL, doubted = :doubted, status = NULL, entry = NULL, detail = NULL,
                doubt = NULL, done_ms = NULL
WHERE task = :task AND num = :num AND idx = :idx;

-- name: blocked
-- Ready calls of a step that refers to one that did not complete, with the first such step and
-- its status (in doubt before the others).  The steps with ready calls are found by a seek each,
-- and weighed once a step, on their first ready call (every call of a step refers to the same
-- steps): a task of a million ready calls is not read whole each time a runner tidies, only the
-- calls of a step that cannot run (work_failed holds the calls that ended without completing).
WITH RECURSIVE steps(num) AS (
    SELECT min(num) FROM work WHERE task = :task AND state = 'ready' AND state <> 'done'
    UNION ALL
    SELECT (SELECT min(n.num) FROM work n WHERE n.task = :task AND n.state = 'ready' AND n.state <> 'done'
            AND n.num > steps.num)
    FROM steps WHERE steps.num IS NOT NULL),
heads(num, deps) AS (
    SELECT steps.num, (SELECT f.deps FROM work f WHERE f.task = :task AND f.state = 'ready' AND f.state <> 'done'
                       AND f.num = steps.num ORDER BY f.idx LIMIT 1)
    FROM steps WHERE steps.num IS NOT NULL),
stuck(num, blocked_num, blocked_status) AS (
    SELECT heads.num,
           (SELECT d.num FROM work d WHERE d.task = :task AND d.num IN (SELECT value FROM json_each(heads.deps))
              AND d.state = 'done' AND d.status NOT IN ('completed', 'skipped')
            ORDER BY d.num LIMIT 1),
           (SELECT d.status FROM work d WHERE d.task = :task AND d.num IN (SELECT value FROM json_each(heads.deps))
              AND d.state = 'done' AND d.status NOT IN ('completed', 'skipped')
            ORDER BY d.num, d.status = 'in_doubt' DESC LIMIT 1)
    FROM heads WHERE heads.deps <> '[]')
SELECT w.num, w.idx, w.kind, w.row_first, w.row_last, w.size, w.data, w.deps, w.serial, w.round, w.doubted,
       w.key_text, w.step_id, stuck.blocked_num, stuck.blocked_status
FROM stuck JOIN work w ON w.task = :task AND w.state = 'ready' AND w.state <> 'done' AND w.num = stuck.num
WHERE stuck.blocked_num IS NOT NULL;

-- name: end_call
-- A call ended without being sent (ruled in doubt, or its step cannot run).
UPDATE work SET state = 'done', runner = NULL, status = :status, entry = :entry, doubt = :doubt, done_ms = :now_ms,
                done_run = (SELECT runs FROM tasks WHERE id = work.task)
WHERE task = :task AND num = :num AND idx = :idx;

-- name: done_call
-- A call's outcome, recorded only while this runner still holds it, and then its record joining
-- the history (record_call's, :sent true) when the outcome was: two statements the connector runs
-- in turn (changes() is the count of the first). Its row is the record written: none when the call
-- was no longer this runner's.
UPDATE work SET state = 'done', status = :status, entry = :entry, detail = :detail, doubt = :doubt, key_text = :key,
                step_id = :step_id, done_ms = :now_ms, done_run = (SELECT runs FROM tasks WHERE id = work.task)
WHERE task = :task AND num = :num AND idx = :idx AND runner = :runner AND state IN ('claimed', 'sent');
{{record_call}} AND changes() = 1
RETURNING num;

-- name: record_call
-- The record of a call just done joins the history (calls, one record an attempt), in the run the
-- task is in; sent_ms only for a call that was sent (:sent). The entry is kept without its detail,
-- and its detail (masked with it) in a column of its own. The text stamps sent_at and done_at are
-- an older journal's, which its report reads where the milliseconds are missing: a record has not
-- written them since, as turning each time into local time took a fortieth of a sequential call.
INSERT INTO calls (task, run, num, row, key, round, step_id, status, in_doubt, result, detail, serial,
                   sent_ms, done_ms)
SELECT w.task, t.again, w.num, w.row_first, w.key_text, w.round, w.step_id, w.status,
       coalesce(w.doubt = 'skipped', 0), json_remove(w.entry, '$.detail'),
       CASE json_type(w.entry, '$.detail') WHEN 'object' THEN json_extract(w.entry, '$.detail')
            WHEN 'array' THEN json_extract(w.entry, '$.detail') WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
            WHEN 'null' THEN 'null' ELSE json_quote(json_extract(w.entry, '$.detail')) END,
       w.serial, CASE WHEN :sent THEN w.sent_ms END, w.done_ms
FROM work w JOIN tasks t ON t.id = w.task WHERE w.task = :task AND w.num = :num AND w.idx = :idx;

-- name: halt_task
UPDATE tasks SET halted = coalesce(halted, :reason) WHERE id = :task;

-- name: gate
-- claimed -> sent, only while the runner's lease is alive and the task not halted (the write
-- transaction holds the file: a halt is seen here or made after): the call's fencing epoch, the next
-- one (work_epoch keeps the last: see migration 0010).
UPDATE work SET state = 'sent', sent_ms = :now_ms, key_text = :key, step_id = :step_id, round = :round,
    epoch = (SELECT value FROM work_epoch WHERE id = 1) + 1, serial = coalesce(:serial, serial)
WHERE task = :task AND num = :num AND idx = :idx AND runner = :runner
  AND (state = 'claimed' OR state = 'sent' AND epoch = :claimed)
  AND EXISTS (SELECT 1 FROM tasks WHERE id = :task AND halted IS NULL)
  AND EXISTS (SELECT 1 FROM runners WHERE id = :runner AND lease_until > :now)
RETURNING epoch;

-- name: serial_busy
-- Another call of the task with this serialize_on value claimed or sent: a call whose value a
-- reference gave waits for it (see 0008 of the PostgreSQL journal).
SELECT count(*) AS n FROM work WHERE task = :task AND serial = :serial AND state IN ('claimed', 'sent')
  AND NOT (num = :num AND idx = :idx);

-- name: not_sent
-- A call claimed (perhaps moved to sent with its claim) from which no request left.
UPDATE work SET sent_ms = NULL WHERE task = :task AND num = :num AND idx = :idx AND runner = :runner
  AND state IN ('claimed', 'sent');

-- name: release_call
UPDATE work SET state = 'ready', runner = NULL
WHERE task = :task AND num = :num AND idx = :idx AND runner = :runner AND state IN ('claimed', 'sent');

-- name: keep_table_rows
INSERT INTO table_rows (task, num, idx, name, prefix, into_job, rows)
VALUES (:task, :num, :idx, :name, :prefix, :into, :rows)
ON CONFLICT (task, num, idx, name) DO UPDATE SET rows = excluded.rows;

-- name: take_placeholder
DELETE FROM work WHERE task = :task AND num = :num AND idx = :idx AND runner = :runner AND state = 'claimed';

-- name: open_counts
-- Calls ready, calls claimed, sent or left in doubt (by anyone), and why the task halted; the calls
-- planned beyond the task's sample are neither. Each count is a range of the index of open calls:
-- the 999,999 calls beyond a sample of one are not read.
SELECT (SELECT count(*) FROM work WHERE task = :task AND state = 'ready' AND state <> 'done') AS ready,
       (SELECT count(*) FROM work WHERE task = :task AND state IN ('claimed', 'sent', 'doubt') AND state <> 'done')
       AS held,
       (SELECT halted FROM tasks WHERE id = :task) AS halted;

-- name: details
-- The detail each step gives references: that of its last call that completed (the row of max(idx)).
SELECT num, detail, max(idx) FROM work
WHERE task = :task AND num IN (SELECT value FROM json_each(:nums)) AND status IN ('completed', 'skipped') GROUP BY num;

-- name: table_names
SELECT DISTINCT name FROM table_rows WHERE task = :task AND num = :num ORDER BY name;

-- name: table_parts
SELECT rows FROM table_rows WHERE task = :task AND num = :num AND name = :name ORDER BY idx;

-- A sampled task widened (tasks.py release)

-- name: cut_by_sample
-- The chunks planned beyond the sample that a wider sample of ? rows cuts.
SELECT num, idx, row_first, data FROM work
WHERE task = :task AND state = 'beyond' AND row_last IS NOT NULL AND row_first < :sample AND row_last >= :sample;

-- name: make_room_out
-- The calls of a step after idx moved one on, in two statements (a key is checked row by row):
-- first out of the way, to -(idx + 1) - 1 (below the placeholder's -1), then back, one on.
UPDATE work SET idx = -idx - 2 WHERE task = :task AND num = :num AND idx > :idx;

-- name: make_room_back
UPDATE work SET idx = -idx - 1 WHERE task = :task AND num = :num AND idx < -1;

-- name: drop_call
DELETE FROM work WHERE task = :task AND num = :num AND idx = :idx;

-- name: release_beyond
-- The calls the wider sample (NULL: every row) holds, released to be claimed.
UPDATE work SET state = 'ready' WHERE task = :task AND state = 'beyond' AND (:sample IS NULL OR row_first < :sample);

-- --replan of a task (tasks.py replanning)

-- name: step_calls
SELECT idx, state, status, key_text, data, round FROM work
WHERE task = :task AND num = :num AND kind = 'call' ORDER BY idx;

-- name: drop_calls
DELETE FROM work WHERE task = :task AND num = :num AND idx IN (SELECT value FROM json_each(:idxs));

-- name: set_round
UPDATE work SET round = :round WHERE task = :task AND num = :num AND idx = :idx;

-- name: table_rows_of_task
-- Every table part the task's calls gave, for pooler gather: each table's parts in call order.
SELECT num, idx, name, prefix, into_job, rows FROM table_rows WHERE task = :task ORDER BY num, name, idx;

-- name: landed
-- A call of the key that completed in the run the task is in (its record, by the calls' key index):
-- the entry without its detail, and the detail.
SELECT result AS entry, detail, 1 AS split FROM calls
WHERE task = :task AND key = :key AND status = 'completed' AND run = (SELECT again FROM tasks WHERE id = :task)
ORDER BY id LIMIT 1;

-- name: kept_keys
-- The keys of the calls a step holds (done, in doubt, or in flight): its placeholder made again
-- leaves them out.
SELECT DISTINCT key_text FROM work WHERE task = :task AND num = :num AND kind = 'call' AND key_text IS NOT NULL;

-- A redrive (pooler.journal.work.redrive_again), in the transaction that begins it. Each takes
-- the task, what it sends again (failed, in_doubt, not_run: 1 or 0) and its scope (step: a step
-- number or NULL; lo, hi: the rows a call must touch, or NULL). The calls it does not send are set
-- aside first (not run, in doubt), so the ones it puts back are not.

-- name: redrive_aside
UPDATE work SET state = 'done', status = 'not_run', runner = NULL
WHERE task = :task AND state = 'ready' AND NOT (:not_run = 1 AND (:step IS NULL OR num = :step)
    AND (:lo IS NULL OR (coalesce(row_last, row_first) >= :lo AND row_first <= :hi)));

-- name: redrive_doubt_aside
UPDATE work SET state = 'done', runner = NULL
WHERE task = :task AND state = 'doubt' AND NOT (:in_doubt = 1 AND (:step IS NULL OR num = :step)
    AND (:lo IS NULL OR (coalesce(row_last, row_first) >= :lo AND row_first <= :hi)));

-- name: redrive_failed
UPDATE work SET state = 'ready', runner = NULL, doubted = NULL,
    round = CASE WHEN json_type(entry, '$.result') = 'true' THEN round ELSE round + 1 END,
    status = NULL, entry = NULL, detail = NULL, doubt = NULL, sent_ms = NULL, done_ms = NULL
WHERE task = :task AND state = 'done' AND status = 'failed' AND :failed = 1 AND (:step IS NULL OR num = :step)
    AND (:lo IS NULL OR (coalesce(row_last, row_first) >= :lo AND row_first <= :hi));

-- name: redrive_not_run
UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
    done_ms = NULL
WHERE task = :task AND state = 'done' AND status = 'not_run' AND :not_run = 1
    AND (:step IS NULL OR num = :step)
    AND (:lo IS NULL OR (coalesce(row_last, row_first) >= :lo AND row_first <= :hi));

-- name: redrive_in_doubt
UPDATE work SET state = 'doubt', runner = NULL, doubt = NULL
WHERE task = :task AND state = 'done' AND status = 'in_doubt' AND :in_doubt = 1
    AND (:step IS NULL OR num = :step)
    AND (:lo IS NULL OR (coalesce(row_last, row_first) >= :lo AND row_first <= :hi));

-- name: pace
-- The next slot of a rate bucket reserved (WorkStore.pace): the bucket's new tat.
INSERT INTO buckets (task, name, tat) VALUES (:task, :name, :now + :interval)
ON CONFLICT (task, name) DO UPDATE SET tat = max(tat, :now) + :interval
RETURNING tat, :now AS now;

-- name: hold
-- A bucket held until a time (WorkStore.hold): its tat, never earlier than it was.
INSERT INTO buckets (task, name, tat) VALUES (:task, :name, :now + :seconds)
ON CONFLICT (task, name) DO UPDATE SET tat = max(tat, :now + :seconds);

-- name: held
SELECT tat - :now AS left FROM buckets WHERE task = :task AND name = :name;

-- name: budget_counts
-- What an error budget counts (pool/budget.py), a row a step: its planned calls (not those beyond
-- the task's sample), and those of its calls that failed and that are in doubt.
SELECT num, count(*) FILTER (WHERE kind = 'call' AND state <> 'beyond') AS planned,
       count(*) FILTER (WHERE status = 'failed') AS failed, count(*) FILTER (WHERE status = 'in_doubt') AS in_doubt
FROM work WHERE task = :task GROUP BY num;

-- name: plan_add
INSERT INTO plans (id, task, created, expires, digest, arguments, state)
VALUES (:id, :task, :created, :expires, :digest, :arguments, :state);

-- name: plan_get
SELECT id, task, expires, digest, arguments, state, host, pid, answer FROM plans WHERE id = :id;

-- name: plan_claim
-- Of two commits of one plan that race, exactly one takes it, and only before it expires.
UPDATE plans SET state = :committed, committed = :now, host = :host, pid = :pid
WHERE id = :id AND state = :planned AND expires > :now;

-- name: plan_state
UPDATE plans SET state = :state, answer = coalesce(:answer, answer) WHERE id = :id;

-- name: lock_task_doc
-- The task's document, its row held to the end of the transaction (the write transaction holds the file).
SELECT shared FROM tasks WHERE id = :task;

-- name: skip_landed_in_scope
-- A new task's calls whose key another task of its scope (the MCP server's session) has landed:
-- skipped, with that call's outcome (its latest), as a key an earlier run landed is.
UPDATE work SET state = 'done', status = 'skipped', runner = NULL, step_id = e.step_id, detail = e.detail,
    entry = json_set(coalesce(e.entry, '{}'), '$.status', 'skipped'), done_ms = :now_ms,
    done_run = (SELECT runs FROM tasks WHERE id = work.task)
FROM (SELECT d.key_text AS key_text, d.entry AS entry, d.detail AS detail, d.step_id AS step_id, max(d.done_ms)
      FROM work d JOIN tasks t ON t.id = d.task
      WHERE json_extract(t.shared, '$.key_scope') = :scope AND d.task <> :task AND d.state = 'done'
        AND d.status IN ('completed', 'skipped') AND d.key_text IS NOT NULL
      GROUP BY d.key_text) e
WHERE work.task = :task AND work.state = 'ready' AND work.key_text = e.key_text;

-- name: analyze_work
-- SQLite's query planner picks the work indexes without statistics: nothing to do after a plan.
SELECT NULL;

-- name: record_run
-- The facts of the run the task is in, kept by its first runner.
INSERT INTO task_runs (task, run, started_ms, store, mode, width, serialize_on, steps, again)
SELECT id, again, :started_ms, :store, :mode, :width, :serialize_on, :steps, :again FROM tasks WHERE id = :task
ON CONFLICT (task, run) DO NOTHING;

-- name: has_placeholder
SELECT count(*) AS n FROM work WHERE task = :task AND num = :num AND idx = :idx;

-- name: take_calls
-- The calls a claim takes (:calls, a JSON array of num, idx, whether it is moved to sent with its
-- step id and fencing epoch, as the gate would; else claimed): the epochs they were given. Each call
-- is found by its key (a join would walk the task's calls).
WITH c AS (SELECT json_extract(value, '$.num') AS num, json_extract(value, '$.idx') AS idx,
                  json_extract(value, '$.sent') AS sent, json_extract(value, '$.step_id') AS step_id,
                  json_extract(value, '$.epoch') AS epoch FROM json_each(:calls))
UPDATE work SET runner = :runner,
    state = CASE WHEN (SELECT sent FROM c WHERE c.num = work.num AND c.idx = work.idx) THEN 'sent' ELSE 'claimed' END,
    sent_ms = CASE WHEN (SELECT sent FROM c WHERE c.num = work.num AND c.idx = work.idx) THEN :now_ms ELSE sent_ms END,
    step_id = coalesce((SELECT step_id FROM c WHERE c.num = work.num AND c.idx = work.idx), step_id),
    epoch = coalesce((SELECT epoch FROM c WHERE c.num = work.num AND c.idx = work.idx), epoch)
WHERE task = :task AND (num, idx) IN (SELECT num, idx FROM c)
RETURNING num, idx, epoch;

-- name: take_call
-- The one call a claim takes (take_calls of a single call, the claim of a sequential run), found by
-- its key without a list to read: its epoch, as take_calls gives.
UPDATE work SET runner = :runner, state = CASE WHEN :sent THEN 'sent' ELSE 'claimed' END,
    sent_ms = CASE WHEN :sent THEN :now_ms ELSE sent_ms END, step_id = coalesce(:step_id, step_id),
    epoch = coalesce(:epoch, epoch)
WHERE task = :task AND num = :num AND idx = :idx
RETURNING num, idx, epoch;

-- name: done_now
-- A call whose outcome halted the task is done once the halt holds.
UPDATE work SET done_ms = :now_ms WHERE task = :task AND num = :num AND idx = :idx;

-- pooler runs --prune (pooler/journal/prune.py): the tasks that ended before :cutoff go, their rows
-- of every table first; a task still running never does.

-- name: prune_calls
DELETE FROM calls WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_plan_rows
DELETE FROM plan_rows WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_plan_files
DELETE FROM plan_files WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_work
DELETE FROM work WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_table_rows
DELETE FROM table_rows WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_runners
DELETE FROM runners WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_buckets
DELETE FROM buckets WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_flows
DELETE FROM flows WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_task_runs
DELETE FROM task_runs WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_runs
DELETE FROM runs WHERE task IN (SELECT id FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff);

-- name: prune_tasks
DELETE FROM tasks WHERE status != 'running' AND finished IS NOT NULL AND finished < :cutoff;

-- name: running_tasks
SELECT count(*) AS n FROM tasks WHERE status = 'running';

-- name: vacuum
VACUUM;

-- name: checkpoint
PRAGMA wal_checkpoint(TRUNCATE);

-- name: compare_put
-- A row of a compare (journal/comparerows.py): its side (0 the store's, 1 the file's), its row
-- number in the file (the store's rows: their order in the table), its match text and digest.
INSERT INTO compare_rows (scope, num, side, idx, match, digest) VALUES (?, ?, ?, ?, ?, ?);

-- name: compare_sent
-- The file's rows that are sent, by row number: new (no table row matches) or changed (no table
-- row that matches has the same digest). The others are unchanged.
SELECT f.idx AS idx, CASE WHEN NOT EXISTS (SELECT 1 FROM compare_rows s WHERE s.scope = f.scope AND s.num = f.num
                                     AND s.side = 0 AND s.match = f.match) THEN 'new' ELSE 'changed' END AS kind
FROM compare_rows f
WHERE f.scope = :scope AND f.num = :num AND f.side = 1
  AND NOT EXISTS (SELECT 1 FROM compare_rows s WHERE s.scope = f.scope AND s.num = f.num AND s.side = 0
                  AND s.match = f.match AND s.digest = f.digest);

-- name: compare_clear
DELETE FROM compare_rows WHERE scope = :scope;

-- name: store_bucket_make
-- A store's bucket (journal/storerate.py), made empty the first time a task calls the store.
INSERT INTO store_buckets (store, tat, slots) VALUES (:store, 0, 0) ON CONFLICT (store) DO NOTHING;

-- name: store_bucket_read
-- Read inside the write transaction that sets it again, which orders the processes.
SELECT tat FROM store_buckets WHERE store = :store;

-- name: store_clock
-- The clock, read by the process once the write lock is held.
SELECT :now AS now;

-- name: store_share_read
-- A task's share's tat, and how many other tasks, calling the store lately, want more of it.
SELECT (SELECT tat FROM store_shares WHERE store = :store AND task = :task) AS tat,
       (SELECT count(*) FROM store_shares WHERE store = :store AND task <> :task
        AND last >= :now - :window AND hungry >= :now) AS others;

-- name: store_share_take
INSERT INTO store_shares (store, task, tat, last, hungry) VALUES (:store, :task, :share, :at, 0)
ON CONFLICT (store, task) DO UPDATE SET tat = :share, last = max(last, :at);

-- name: store_bucket_take
UPDATE store_buckets SET tat = :tat, slots = slots + 1 WHERE store = :store RETURNING slots;

-- name: store_share_slot
-- The task's slot in the store's bucket; when its call waited for it, it wants more of the store.
UPDATE store_shares SET last = max(last, :at), hungry = CASE WHEN :waited THEN :hungry ELSE hungry END
WHERE store = :store AND task = :task;

-- name: store_shares_forget
-- The shares of tasks that stopped calling long ago.
DELETE FROM store_shares WHERE last < :now - :forget;
