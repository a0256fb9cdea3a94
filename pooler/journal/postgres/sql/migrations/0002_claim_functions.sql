-- The claim functions: a claim of the next calls and the record of a call's outcome, each one
-- round trip (journals of schema version 1 were made without them).
-- A claim: under the task's advisory lock (so the count of calls in flight is exact when it is
-- weighed against the cap), the first ready calls in file order whose steps referred to have
-- completed and whose serialize_on value has no earlier call not done.  A function, so the lock
-- and the claim (each statement with a fresh snapshot) cost one round trip.
CREATE OR REPLACE FUNCTION pooler_claim(p_task TEXT, p_runner TEXT, p_limit INTEGER, p_cap INTEGER)
RETURNS SETOF work LANGUAGE plpgsql AS $$
DECLARE
    v_halted TEXT;
    v_busy INTEGER;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_task));
    SELECT halted INTO v_halted FROM tasks WHERE id = p_task;
    IF NOT FOUND OR v_halted IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT count(*) INTO v_busy FROM work WHERE task = p_task AND state IN ('claimed', 'sent');
    IF p_cap - v_busy <= 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE work SET state = 'claimed', runner = p_runner
    WHERE ctid = ANY(ARRAY(
        SELECT w.ctid FROM work w WHERE w.task = p_task AND w.state = 'ready'
          AND (w.deps = '{}' OR NOT EXISTS (SELECT 1 FROM work d WHERE d.task = w.task
               AND d.num = ANY(w.deps) AND (d.state <> 'done' OR d.status NOT IN ('completed', 'skipped'))))
          AND (w.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = w.task
               AND s.serial = w.serial AND (s.num, s.idx) < (w.num, w.idx) AND s.state <> 'done'))
        ORDER BY w.num, w.idx LIMIT least(p_limit, p_cap - v_busy) FOR UPDATE SKIP LOCKED))
    RETURNING *;
END $$;
-- A call's outcome, recorded only while this runner still holds it: whether it was.
CREATE OR REPLACE FUNCTION pooler_done(p_task TEXT, p_runner TEXT, p_num INTEGER, p_idx INTEGER,
    p_status TEXT, p_entry JSON, p_detail JSON, p_doubt TEXT, p_key TEXT, p_step_id TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
    UPDATE work SET state = 'done', status = p_status, entry = p_entry, detail = p_detail, doubt = p_doubt,
        key_text = p_key, step_id = p_step_id, done_at = clock_timestamp()
    WHERE task = p_task AND num = p_num AND idx = p_idx AND runner = p_runner
      AND state IN ('claimed', 'sent');
    RETURN FOUND;
END $$;
