-- A task run again leaves its calls in doubt to the runners' rule (the one a single-host run
-- follows, in pooler/run/rulings.py) instead of settling them here: they wait in the state
-- `doubt`, and the first runner that tidies the task rules each by the new run's --in-doubt
-- (sent again under the same key, counted done, or the task stopped naming it), as it rules a
-- call a runner whose lease expired left sent.  Otherwise as in 0004:
--   failed -> ready under the next key round (the store proved it was not carried out), or under
--     the same round when the store carried it out and only its tables could not be written
--     (`result: true`): the store's stored answer is the one wanted;
--   not_run -> ready (the step it referred to may run now);
--   completed without a key -> ready: nothing tells it apart from a new call, so it is sent again,
--     as a task run again on SQLite sends it ("without keys the batch restarts from the beginning");
--   completed with a key, and skipped, stay; the task's halt is cleared and its --in-doubt is the
--   new run's.
CREATE OR REPLACE FUNCTION pooler_run_again(p_task TEXT, p_in_doubt TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_task));
    PERFORM 1 FROM tasks WHERE id = p_task FOR UPDATE;
    IF EXISTS (SELECT 1 FROM runners WHERE task = p_task AND lease_until > now()) THEN
        UPDATE tasks SET runs = runs + 1, status = 'running', finished = NULL WHERE id = p_task;
        RETURN false;
    END IF;
    UPDATE work SET state = 'ready', runner = NULL, doubted = NULL,
        round = CASE WHEN status = 'failed' AND (entry ->> 'result') = 'true' THEN round ELSE round + 1 END,
        status = NULL, entry = NULL, detail = NULL, doubt = NULL, sent_at = NULL, done_at = NULL
    WHERE task = p_task AND state = 'done' AND status = 'failed';
    UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
        done_at = NULL
    WHERE task = p_task AND state = 'done' AND status = 'not_run';
    UPDATE work SET state = 'ready', runner = NULL, status = NULL, entry = NULL, detail = NULL, doubt = NULL,
        sent_at = NULL, done_at = NULL
    WHERE task = p_task AND state = 'done' AND status = 'completed' AND key_text IS NULL AND kind = 'call';
    UPDATE work SET state = 'doubt', runner = NULL, doubt = NULL
    WHERE task = p_task AND state = 'done' AND status = 'in_doubt';
    UPDATE tasks SET runs = runs + 1, again = runs + 1, status = 'running', finished = NULL, halted = NULL,
        shared = shared || jsonb_build_object('in_doubt', p_in_doubt) WHERE id = p_task;
    RETURN true;
END $$;
-- The run of the task a call was done in, and the run the task is in now (a run again starts
-- one; a runner that joins a run some live runner holds takes part in it): an answer tells a call
-- done in an earlier run `skipped`, as a single-host run tells a key an earlier run did.  Calls
-- done before this version have no run: they were done before the journal was upgraded, so in
-- an earlier run than any after it.
ALTER TABLE work ADD COLUMN IF NOT EXISTS done_run INTEGER;
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS again INTEGER NOT NULL DEFAULT 1;
-- Every outcome a call had, one record an attempt, whichever runner made it: the history a task's
-- HTML report draws (its runs, their timelines), as the calls of a SQLite journal keep it. A call
-- sent whose outcome is not recorded is its work row, state sent.
-- One index, the key: a call's record costs the least to write, and a task's records are read by it.
CREATE TABLE IF NOT EXISTS calls (
    id BIGSERIAL,
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    run INTEGER NOT NULL,
    num INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    row INTEGER,
    key TEXT,
    step_id TEXT,
    status TEXT NOT NULL,
    in_doubt BOOLEAN NOT NULL DEFAULT false,
    runner TEXT,
    serial TEXT,
    sent_ms BIGINT,
    done_ms BIGINT,
    entry JSON,
    PRIMARY KEY (task, id)
);
-- What each run of a task went with (the report's facts): recorded by its first runner.
CREATE TABLE IF NOT EXISTS task_runs (
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    run INTEGER NOT NULL,
    store TEXT,
    mode TEXT,
    width INTEGER,
    serialize_on TEXT,
    steps JSON,
    again JSON,
    PRIMARY KEY (task, run)
);
-- A call's outcome, recorded only while the call is still this runner's; its record joins the
-- history in the same statement.
CREATE OR REPLACE FUNCTION pooler_done(p_task TEXT, p_runner TEXT, p_num INTEGER, p_idx INTEGER,
    p_status TEXT, p_entry JSON, p_detail JSON, p_doubt TEXT, p_key TEXT, p_step_id TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
    WITH done AS (
        UPDATE work SET state = 'done', status = p_status, entry = p_entry, detail = p_detail, doubt = p_doubt,
            key_text = p_key, step_id = p_step_id, done_at = clock_timestamp(),
            done_run = (SELECT runs FROM tasks WHERE id = p_task)
        WHERE task = p_task AND num = p_num AND idx = p_idx AND runner = p_runner
          AND state IN ('claimed', 'sent')
        RETURNING num, idx, row_first, serial, sent_at, done_at)
    INSERT INTO calls (task, run, num, idx, row, key, step_id, status, in_doubt, runner, serial, sent_ms,
                       done_ms, entry)
    SELECT p_task, (SELECT again FROM tasks WHERE id = p_task), num, idx, row_first, p_key, p_step_id,
           p_status, coalesce(p_doubt = 'skipped', false), p_runner, serial,
           (extract(epoch FROM sent_at) * 1000)::BIGINT, (extract(epoch FROM done_at) * 1000)::BIGINT, p_entry
    FROM done;
    RETURN FOUND;
END $$;
