-- The SQLite journal's queries, by name (pooler/journal/queries.py reads them). The tables are
-- made by the numbered files of migrations/; every query here reads or writes what they make.

-- Tasks

-- name: task_exists
SELECT 1 FROM tasks WHERE id = ?;

-- name: insert_task
INSERT INTO tasks (id, pool_file, started, store) VALUES (?, ?, ?, ?);

-- name: task_runs
SELECT runs FROM tasks WHERE id = ?;

-- name: reopen_task
-- A task run again: running once more; its store recorded if it had none (an older task).
UPDATE tasks SET runs = ?, status = 'running', finished = NULL, store = COALESCE(store, ?) WHERE id = ?;

-- name: runs_of_task
SELECT run, host, pid FROM runs WHERE task = ?;

-- name: enter_run
INSERT OR REPLACE INTO runs (task, run, host, pid) VALUES (?, ?, ?, ?);

-- name: leave_runs
DELETE FROM runs WHERE task = ? AND host = ? AND pid = ?;

-- name: task
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run, store
FROM tasks WHERE id = ?;

-- name: tasks
SELECT id, pool_file, started, finished, status, runs, total, succeeded, failed, skipped, not_run, store
FROM tasks ORDER BY started DESC, rowid DESC LIMIT ?;

-- name: last_unfinished
SELECT id FROM tasks WHERE pool_file = ? AND status != 'completed'
ORDER BY started DESC, rowid DESC LIMIT 1;

-- name: finish_task
UPDATE tasks SET finished = ?, status = ?, total = ?, succeeded = ?, failed = ?, skipped = ?, not_run = ?,
                 answer = ?
WHERE id = ?;

-- name: answer
SELECT answer FROM tasks WHERE id = ?;

-- Calls

-- name: keyed
-- The standing record of every key of a task: its last completed or skipped record, else its last
-- one. A call of a step over rows (row set) comes without its entry, except a failed one's: whether
-- the store carried it out (only its tables failed here) decides the round it is sent again with.
SELECT key, num, row, step_id, round, status, in_doubt,
       CASE WHEN row IS NULL OR status = 'failed' THEN result END, CASE WHEN row IS NULL THEN detail END,
       id, run
FROM calls WHERE id IN (
    SELECT COALESCE(MAX(CASE WHEN status IN ('completed', 'skipped') THEN id END), MAX(id))
    FROM calls WHERE task = ? AND key IS NOT NULL AND status != 'not_run' GROUP BY key);

-- name: standing_of
SELECT COALESCE(MAX(CASE WHEN status IN ('completed', 'skipped') THEN id END), MAX(id))
FROM calls WHERE task = ? AND key = ? AND status != 'not_run';

-- name: record
SELECT key, num, row, step_id, round, status, in_doubt, result, detail, id, run FROM calls WHERE id = ?;

-- name: insert_sent
-- A call about to leave: committed before it does.
INSERT INTO calls (task, run, num, row, key, round, step_id, status, sent_at, lane, serial, sent_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, 'sent', ?, ?, ?, ?);

-- name: record_done
UPDATE calls SET status = ?, done_at = ?, result = ?, detail = ?, done_ms = ? WHERE id = ?;

-- name: insert_call
INSERT INTO calls (task, run, num, row, key, round, step_id, status, in_doubt, sent_at, done_at, result,
                   detail, lane, serial, sent_ms, done_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: calls_of_task
SELECT run, num, row, key, round, step_id, status, in_doubt, sent_at, done_at, result, detail
FROM calls WHERE task = ? ORDER BY id;

-- name: record_run
INSERT OR REPLACE INTO task_runs (task, run, started_ms, store, mode, width, serialize_on, steps, again)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- A task's report (history.py)

-- name: report_runs
SELECT run, store, mode, width, serialize_on, steps, again FROM task_runs WHERE task = ? ORDER BY run;

-- name: report_calls
SELECT id, run, num, row, key, step_id, status, in_doubt, lane, serial, sent_ms, done_ms, sent_at, done_at
FROM calls WHERE task = ? ORDER BY id;

-- name: report_first_entries
SELECT num, result FROM calls WHERE id IN (SELECT MIN(id) FROM calls WHERE task = ? GROUP BY num);

-- name: report_entries
-- The ids come as one JSON array.
SELECT id, result FROM calls WHERE task = ? AND id IN (SELECT value FROM json_each(?));

-- name: report_table_entries
-- Picked in SQL, so that 100,000 calls without tables are not decoded for nothing.
SELECT result FROM calls WHERE task = ? AND run = ? AND status = 'completed' AND result LIKE '%"tables":{"%';

-- A task's plan (run/taskplan.py, run/replan.py, run/plancount.py)

-- name: plan_forget_rows
DELETE FROM plan_rows WHERE task = ?;

-- name: plan_forget_files
DELETE FROM plan_files WHERE task = ?;

-- name: plan_insert_rows
INSERT INTO plan_rows (task, num, row, key, data, done) VALUES (?, ?, ?, ?, ?, ?);

-- name: plan_insert_files
INSERT INTO plan_files (task, num, name, path, sha256, rows, chunk, first_run) VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: plan_files_of_task
SELECT num, name, path, sha256, rows, chunk, first_run FROM plan_files WHERE task = ? ORDER BY num;

-- name: plan_rows_page
-- The step's planned rows after a row, a page at a time.
SELECT row, data, done FROM plan_rows WHERE task = ? AND num = ? AND row > ? ORDER BY row LIMIT ?;

-- name: plan_done_rows
SELECT row FROM plan_rows WHERE task = ? AND num = ? AND done = 1;

-- name: plan_done_keys
SELECT key FROM plan_rows WHERE task = ? AND num = ? AND done = 1 AND key IS NOT NULL;

-- name: plan_keys_in_span
SELECT key FROM plan_rows WHERE task = ? AND num = ? AND row BETWEEN ? AND ? AND key IS NOT NULL;

-- name: calls_sent_of_step
-- The calls a step sent (or ended in doubt or failed): all but those not run.
SELECT count(*) FROM calls WHERE task = ? AND num = ? AND status NOT IN ('not_run');

-- name: chunk_records_since
-- Every record of a keyed step since the run that made its plan, oldest first.
SELECT key, status FROM calls WHERE task = ? AND num = ? AND key IS NOT NULL AND run >= ? AND status != 'not_run'
ORDER BY id;

-- name: latest_run_steps
SELECT steps FROM task_runs WHERE task = ? ORDER BY run DESC LIMIT 1;

-- name: single_call_records
SELECT status, in_doubt FROM calls WHERE task = ? AND num = ? AND row IS NULL AND run >= ? ORDER BY id;

-- name: row_call_records
-- The records of a step over rows since the run that made its plan: the last row of a chunk from
-- its entry (a chunk's key tells it too).
SELECT row, key, status, in_doubt,
       CASE WHEN result IS NOT NULL AND json_valid(result) THEN json_extract(result, '$.rows[1]') END
FROM calls WHERE task = ? AND num = ? AND row IS NOT NULL AND run >= ? ORDER BY id;
