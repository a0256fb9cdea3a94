-- The plans `pooler mcp` makes for an agent (tool_pool {"plan": true}), kept in the journal of the
-- store folder so that any process serving that folder commits a plan at most once. state is a
-- PlanState (pooler/statuses.py); host and pid name the committer (journal/liveness.py), answer is
-- the committed plan's answer, already masked. Journals that kept plans before this migration made
-- the same table themselves, so it is made only where it is missing.
CREATE TABLE IF NOT EXISTS plans (
    id TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    digest TEXT NOT NULL,
    arguments TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'planned',
    committed REAL,
    host TEXT,
    pid INTEGER,
    answer TEXT
);
