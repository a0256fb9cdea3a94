-- A task run again: a runner that joins a task no live runner holds starts a new run of it, in
-- which the calls that failed are sent again, as a task run again on SQLite sends them.
-- An entry with some of its keys given new values and the others added after them, in the order
-- of its keys (entries are JSON, not JSONB: the answer keeps that order).
CREATE OR REPLACE FUNCTION pooler_entry_with(p_entry JSON, p_with JSON)
RETURNS JSON LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(json_object_agg(k, v ORDER BY o), '{}'::json) FROM (
        SELECT e.key AS k, coalesce(w.value, e.value) AS v, e.o AS o
        FROM json_each(p_entry) WITH ORDINALITY e(key, value, o) LEFT JOIN json_each(p_with) w ON w.key = e.key
        UNION ALL
        SELECT w.key, w.value, 1000000 + w.o FROM json_each(p_with) WITH ORDINALITY w(key, value, o)
        WHERE NOT EXISTS (SELECT 1 FROM json_each(p_entry) e WHERE e.key = w.key)) s
$$;
-- One more runner of the task; whether it starts a new run.  Under the task's advisory lock (which
-- every claim takes, and every send follows a claim) and its row's lock, so two runners joining at
-- once start one run: the second finds the first's lease, or finds nothing left to reset.  A task
-- some live runner (an unexpired lease) holds is joined as it is: a call that failed in its run
-- is not reset under it.  Otherwise, in the new run:
--   failed -> ready under the next key round (the store proved it was not carried out), or under
--     the same round when the store carried it out and only its tables could not be written
--     (`result: true`): the store's stored answer is the one wanted;
--   not_run -> ready (the step it referred to may run now);
--   in_doubt, by the new run's --in-doubt: retry -> ready, same key and round (an unkeyed call
--     stays in doubt: nothing tells the store it is a repeat); skip -> skipped in doubt; stop ->
--     the task halts naming it;
--   completed and skipped stay; the task's halt is cleared and its --in-doubt is the new run's.
CREATE OR REPLACE FUNCTION pooler_run_again(p_task TEXT, p_in_doubt TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
    v_halt TEXT;
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
    IF p_in_doubt = 'retry' THEN
        UPDATE work SET state = 'ready', runner = NULL, doubted = coalesce(doubted, step_id), status = NULL,
            entry = NULL, detail = NULL, doubt = NULL, done_at = NULL
        WHERE task = p_task AND state = 'done' AND status = 'in_doubt' AND key_text IS NOT NULL;
    ELSIF p_in_doubt = 'skip' THEN
        UPDATE work SET status = 'skipped', doubt = 'skipped', entry = pooler_entry_with(entry,
            json_build_object('status', 'skipped', 'in_doubt', true, 'result', true, 'message',
                'counted done without its answer: the call ' || step_id || ' was sent and its answer '
                'never came back (--in-doubt skip).'))
        WHERE task = p_task AND state = 'done' AND status = 'in_doubt';
    ELSE
        UPDATE work w SET doubt = 'stopped', entry = pooler_entry_with(w.entry, json_build_object('message',
            'Step ' || w.num || coalesce(' (' || (SELECT s ->> 'name' FROM tasks t,
                jsonb_array_elements(t.shared -> 'steps') s WHERE t.id = p_task AND (s ->> 'num')::int = w.num)
                || ')', '') || ' was sent as ' || w.step_id || ' and its answer never came back: it may '
            'or may not have been carried out. Check the store, then run the task again with --in-doubt '
            'skip (it was done) or --in-doubt retry (send it again with the same Idempotency-Key).'))
        WHERE task = p_task AND state = 'done' AND status = 'in_doubt';
        SELECT 'step ' || num || ' in doubt' INTO v_halt FROM work
        WHERE task = p_task AND state = 'done' AND status = 'in_doubt' ORDER BY num, idx LIMIT 1;
    END IF;
    UPDATE tasks SET runs = runs + 1, status = 'running', finished = NULL, halted = v_halt,
        shared = shared || jsonb_build_object('in_doubt', p_in_doubt) WHERE id = p_task;
    RETURN true;
END $$;
