-- A task run again leaves its calls in doubt to the runners' rule (the one a single-host run
-- follows, in pooler/run/rulings.py) instead of settling them here: they wait in the state
-- `doubt`, and the first runner that tidies the task rules each by the new run's --in-doubt
-- (sent again under the same key, counted done, or the task stopped naming it), as it rules a
-- call a runner whose lease expired left sent.  Otherwise as in 0004:
--   failed -> ready under the next key round (the store proved it was not carried out), or under
--     the same round when the store carried it out and only its tables could not be written
--     (`result: true`): the store's stored answer is the one wanted;
--   not_run -> ready (the step it referred to may run now);
--   completed and skipped stay; the task's halt is cleared and its --in-doubt is the new run's.
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
    UPDATE work SET state = 'doubt', runner = NULL, doubt = NULL
    WHERE task = p_task AND state = 'done' AND status = 'in_doubt';
    UPDATE tasks SET runs = runs + 1, status = 'running', finished = NULL, halted = NULL,
        shared = shared || jsonb_build_object('in_doubt', p_in_doubt) WHERE id = p_task;
    RETURN true;
END $$;
