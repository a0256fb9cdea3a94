-- A claim that also moves the calls it hands out to sent, so a call costs one round trip: its
-- outcome, the claim of the next calls and their gate go in one statement.
-- Whether the plan holds the call's key material: true when key_text is the call's key as the
-- planner's variables made it, masked (NULL: its step has no key); NULL for a call planned before
-- this version, or whose key the planner could not make.
ALTER TABLE work ADD COLUMN IF NOT EXISTS key_planned BOOLEAN;
-- The claim is pooler_claim's (the task's lock, the cap, the fair share, serialize_on, the steps
-- referred to).  Then, as the runner's gate does: the task's row read FOR SHARE (a halt either
-- waits for these calls to be marked sent, or is seen here and none is), the lease alive by the
-- clock of now (not of the transaction's start, which waited for the task's lock), and each call
-- its own fencing epoch.  Only a call whose key the plan holds moves, with the step id the runner
-- gives every call of its run (p_run).  The rest stay claimed, for the runner's own gate; a
-- runner that makes another key for a call moved here (other variables) gates it again.
CREATE OR REPLACE FUNCTION pooler_claim_gate(p_task TEXT, p_runner TEXT, p_limit INTEGER, p_cap INTEGER,
    p_run INTEGER)
RETURNS SETOF work LANGUAGE plpgsql AS $$
DECLARE
    v_nums INTEGER[];
    v_idxs INTEGER[];
    v_halted TEXT;
BEGIN
    SELECT array_agg(c.num), array_agg(c.idx) INTO v_nums, v_idxs
    FROM pooler_claim(p_task, p_runner, p_limit, p_cap) c;
    IF v_nums IS NULL THEN
        RETURN;
    END IF;
    SELECT halted INTO v_halted FROM tasks WHERE id = p_task FOR SHARE;
    IF v_halted IS NULL AND EXISTS (SELECT 1 FROM runners WHERE id = p_runner
                                    AND lease_until > clock_timestamp()) THEN
        UPDATE work SET state = 'sent', sent_at = clock_timestamp(),
            step_id = p_task || '-' || num || coalesce('-' || row_first, '') || '-' || p_run,
            epoch = nextval('pooler_epoch')
        WHERE task = p_task AND (num, idx) IN (SELECT * FROM unnest(v_nums, v_idxs))
          AND runner = p_runner AND state = 'claimed' AND kind = 'call' AND key_planned;
    END IF;
    RETURN QUERY SELECT * FROM work WHERE task = p_task AND (num, idx) IN (SELECT * FROM unnest(v_nums, v_idxs));
END $$;
