-- A call whose serialize_on value is a reference to an earlier step has it only once its params
-- are resolved: its runner writes the value's digest on the work row as it moves the call to
-- sent (the gate, under the task's lock), and the gate refuses while another call of that value is
-- claimed or sent.  So a call planned with that value is not claimed while such a call, later in
-- the file, is in flight: the claim of 0007, with that term.
CREATE OR REPLACE FUNCTION pooler_claim_gate(p_task TEXT, p_runner TEXT, p_limit INTEGER, p_cap INTEGER,
    p_run INTEGER)
RETURNS SETOF work LANGUAGE plpgsql AS $$
DECLARE
    v_halted TEXT;
    v_busy INTEGER;
    v_mine INTEGER;
    v_gate BOOLEAN;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_task));
    IF p_run IS NULL THEN
        SELECT halted INTO v_halted FROM tasks WHERE id = p_task;
    ELSE
        SELECT halted INTO v_halted FROM tasks WHERE id = p_task FOR SHARE;
    END IF;
    IF NOT FOUND OR v_halted IS NOT NULL THEN
        RETURN;
    END IF;
    SELECT count(*), count(*) FILTER (WHERE runner = p_runner) INTO v_busy, v_mine
    FROM work WHERE task = p_task AND state IN ('claimed', 'sent');
    IF p_cap - v_busy <= 0 THEN
        RETURN;
    END IF;
    -- Held to its share only while the cap is shared: a runner alone takes the whole cap.
    p_limit := least(p_limit, pooler_share(p_task, p_runner, p_cap) - v_mine);
    IF p_limit <= 0 THEN
        RETURN;
    END IF;
    v_gate := p_run IS NOT NULL AND EXISTS (SELECT 1 FROM runners WHERE id = p_runner
                                            AND lease_until > clock_timestamp());
    RETURN QUERY
    UPDATE work SET runner = p_runner,
        state = CASE WHEN v_gate AND kind = 'call' AND key_planned THEN 'sent' ELSE 'claimed' END,
        sent_at = CASE WHEN v_gate AND kind = 'call' AND key_planned THEN clock_timestamp() ELSE sent_at END,
        step_id = CASE WHEN v_gate AND kind = 'call' AND key_planned
                       THEN p_task || '-' || num || coalesce('-' || row_first, '') || '-' || p_run
                       ELSE step_id END,
        epoch = CASE WHEN v_gate AND kind = 'call' AND key_planned THEN nextval('pooler_epoch') ELSE epoch END
    WHERE ctid = ANY(ARRAY(
        SELECT w.ctid FROM work w WHERE w.task = p_task AND w.state = 'ready'
          AND (w.deps = '{}' OR NOT EXISTS (SELECT 1 FROM work d WHERE d.task = w.task
               AND d.num = ANY(w.deps) AND d.state <> 'beyond'
               AND (d.state <> 'done' OR d.status NOT IN ('completed', 'skipped'))))
          AND (w.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = w.task
               AND s.serial = w.serial AND ((s.num, s.idx) < (w.num, w.idx) AND s.state NOT IN ('done', 'beyond')
                                            OR s.state IN ('claimed', 'sent'))))
        ORDER BY w.num, w.idx LIMIT least(p_limit, p_cap - v_busy) FOR UPDATE SKIP LOCKED))
    RETURNING *;
END $$;
