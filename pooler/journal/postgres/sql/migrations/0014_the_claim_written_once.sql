-- The claim, a call's outcome, a task run again and the runners' fair share are written once, in
-- Python over each backend's queries (pooler/journal/claims.py, tasks.py), as SQLite has them: the
-- functions that wrote them a second time, in PL/pgSQL, go.  pooler_entry_with stays: it is one
-- expression a query of both ages uses.
DROP FUNCTION IF EXISTS pooler_claim(TEXT, TEXT, INTEGER, INTEGER);
DROP FUNCTION IF EXISTS pooler_claim_gate(TEXT, TEXT, INTEGER, INTEGER, INTEGER);
DROP FUNCTION IF EXISTS pooler_done(TEXT, TEXT, INTEGER, INTEGER, TEXT, JSON, JSON, TEXT, TEXT, TEXT);
DROP FUNCTION IF EXISTS pooler_run_again(TEXT, TEXT);
DROP FUNCTION IF EXISTS pooler_share(TEXT, TEXT, INTEGER);
