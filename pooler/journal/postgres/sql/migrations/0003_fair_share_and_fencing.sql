-- Runners share a task's cap fairly, and each send of a call carries a fencing epoch.
-- The calls a runner has in flight at most (--width); NULL: the task's cap.
ALTER TABLE runners ADD COLUMN IF NOT EXISTS width INTEGER;
-- The fencing epoch of the call's latest send; each send takes the next of the sequence, so a
-- runner that takes a call back sends it under a higher epoch than the runner it took it from.
ALTER TABLE work ADD COLUMN IF NOT EXISTS epoch BIGINT;
CREATE SEQUENCE IF NOT EXISTS pooler_epoch;
-- A runner's fair share of the task's cap: the cap divided among the live runners (an unexpired
-- lease) as water fills vessels, each up to its width: a runner narrower than an equal part keeps
-- its width, the others split what is left in equal parts, one more for each of the first to
-- join while a remainder lasts.  So the shares add up to the cap, and N runners of the default
-- width hold cap/N each.
CREATE OR REPLACE FUNCTION pooler_share(p_task TEXT, p_runner TEXT, p_cap INTEGER)
RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
    v_left INTEGER := p_cap;
    v_n INTEGER;
    v_wide INTEGER;
    v_rank INTEGER;
    r RECORD;
BEGIN
    SELECT count(*) INTO v_n FROM runners WHERE task = p_task AND (lease_until > now() OR id = p_runner);
    FOR r IN SELECT id, least(coalesce(width, p_cap), p_cap) AS w FROM runners
             WHERE task = p_task AND (lease_until > now() OR id = p_runner) ORDER BY 2 LOOP
        IF r.w * v_n > v_left THEN
            v_wide := r.w;
            EXIT;
        END IF;
        IF r.id = p_runner THEN
            RETURN r.w;
        END IF;
        v_left := v_left - r.w;
        v_n := v_n - 1;
    END LOOP;
    IF v_wide IS NULL THEN
        RETURN p_cap;
    END IF;
    SELECT count(*) INTO v_rank FROM runners o, runners me
    WHERE me.id = p_runner AND o.task = p_task AND (o.lease_until > now() OR o.id = p_runner)
      AND least(coalesce(o.width, p_cap), p_cap) >= v_wide AND (o.started, o.id) < (me.started, me.id);
    RETURN v_left / v_n + CASE WHEN v_rank < v_left % v_n THEN 1 ELSE 0 END;
END $$;
-- A claim: under the task's advisory lock (so the count of calls in flight is exact when it is
-- weighed against the cap), the first ready calls in file order whose steps referred to have
-- completed and whose serialize_on value has no earlier call not done, as many as the cap and
-- this runner's fair share leave.  A function, so the lock and the claim (each statement with a
-- fresh snapshot) cost one round trip.
CREATE OR REPLACE FUNCTION pooler_claim(p_task TEXT, p_runner TEXT, p_limit INTEGER, p_cap INTEGER)
RETURNS SETOF work LANGUAGE plpgsql AS $$
DECLARE
    v_halted TEXT;
    v_busy INTEGER;
    v_mine INTEGER;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_task));
    SELECT halted INTO v_halted FROM tasks WHERE id = p_task;
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
