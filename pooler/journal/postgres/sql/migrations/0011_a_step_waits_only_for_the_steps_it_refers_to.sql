-- A claim takes first the first claimable call of each step whose steps referred to have
-- completed, the steps with the fewest calls claimed or sent first (then file order), and only
-- then the rest in file order: in a parallel pool a step waits only for the steps it refers to,
-- never for the rows of a step before it (file order alone sent a lone step after all of them).
-- Sequential pools keep file order: with one call at a time every step has none in flight.
-- The steps are found by a seek each, the first v_take + 32 steps with ready calls only (a claim
-- costs the same whatever the pool's steps), and none for one call at a time (p_cap 1: file order);
-- deps are those of every row of a step, so they are weighed once a step, on its first ready row.
-- The claim of 0008 otherwise.
CREATE OR REPLACE FUNCTION pooler_claim_gate(p_task TEXT, p_runner TEXT, p_limit INTEGER, p_cap INTEGER,
    p_run INTEGER)
RETURNS SETOF work LANGUAGE plpgsql AS $$
DECLARE
    v_halted TEXT;
    v_busy INTEGER;
    v_mine INTEGER;
    v_gate BOOLEAN;
    v_take INTEGER;
    v_heads TID[];
    v_rest TID[];
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
    v_take := least(p_limit, p_cap - v_busy);
    v_gate := p_run IS NOT NULL AND EXISTS (SELECT 1 FROM runners WHERE id = p_runner
                                            AND lease_until > clock_timestamp());
    v_heads := ARRAY(
        WITH RECURSIVE steps(num, n) AS (
            SELECT min(num), 1 FROM work WHERE task = p_task AND state = 'ready'
            UNION ALL
            SELECT (SELECT min(n.num) FROM work n WHERE n.task = p_task AND n.state = 'ready' AND n.num > steps.num),
                   steps.n + 1
            FROM steps WHERE steps.num IS NOT NULL AND steps.n < v_take + 32 AND p_cap > 1)
        SELECT x.ctid FROM steps
        CROSS JOIN LATERAL (SELECT f.deps FROM work f WHERE f.task = p_task AND f.state = 'ready'
                            AND f.num = steps.num ORDER BY f.idx LIMIT 1) h
        CROSS JOIN LATERAL (SELECT w.ctid FROM work w WHERE w.task = p_task AND w.state = 'ready'
                            AND w.num = steps.num
                            AND (w.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = w.task
                                 AND s.serial = w.serial AND ((s.num, s.idx) < (w.num, w.idx)
                                                              AND s.state NOT IN ('done', 'beyond')
                                                              OR s.state IN ('claimed', 'sent'))))
                            ORDER BY w.idx LIMIT 1) x
        WHERE steps.num IS NOT NULL AND p_cap > 1
          AND (h.deps = '{}' OR NOT EXISTS (SELECT 1 FROM work d WHERE d.task = p_task
               AND d.num = ANY(h.deps) AND d.state <> 'beyond'
               AND (d.state <> 'done' OR d.status NOT IN ('completed', 'skipped'))))
        ORDER BY (SELECT count(*) FROM work b WHERE b.task = p_task AND b.num = steps.num
                  AND b.state IN ('claimed', 'sent')), steps.num
        LIMIT v_take);
    v_rest := ARRAY(
        SELECT w.ctid FROM work w WHERE w.task = p_task AND w.state = 'ready'
          AND w.ctid <> ALL(v_heads)
          AND (w.deps = '{}' OR NOT EXISTS (SELECT 1 FROM work d WHERE d.task = w.task
               AND d.num = ANY(w.deps) AND d.state <> 'beyond'
               AND (d.state <> 'done' OR d.status NOT IN ('completed', 'skipped'))))
          AND (w.serial IS NULL OR NOT EXISTS (SELECT 1 FROM work s WHERE s.task = w.task
               AND s.serial = w.serial AND ((s.num, s.idx) < (w.num, w.idx) AND s.state NOT IN ('done', 'beyond')
                                            OR s.state IN ('claimed', 'sent'))))
        ORDER BY w.num, w.idx LIMIT v_take - cardinality(v_heads) FOR UPDATE SKIP LOCKED);
    RETURN QUERY
    UPDATE work SET runner = p_runner,
        state = CASE WHEN v_gate AND kind = 'call' AND key_planned THEN 'sent' ELSE 'claimed' END,
        sent_at = CASE WHEN v_gate AND kind = 'call' AND key_planned THEN clock_timestamp() ELSE sent_at END,
        step_id = CASE WHEN v_gate AND kind = 'call' AND key_planned
                       THEN p_task || '-' || num || coalesce('-' || row_first, '') || '-' || p_run
                       ELSE step_id END,
        epoch = CASE WHEN v_gate AND kind = 'call' AND key_planned THEN nextval('pooler_epoch') ELSE epoch END
    WHERE ctid = ANY(v_heads || v_rest)
    RETURNING *;
END $$;
