"""The journal's tables on PostgreSQL: their version, and the one command that creates or upgrades
them (``pooler journal upgrade``).  A runner refuses a journal of another version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pooler.errors import JournalError

if TYPE_CHECKING:
    import psycopg

#: The version of the tables below; ``upgrade`` brings an older journal to it.
SCHEMA_VERSION = 2

_TABLES = """
CREATE TABLE IF NOT EXISTS pooler_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    pool_file TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    status TEXT NOT NULL DEFAULT 'running',
    runs INTEGER NOT NULL DEFAULT 1,
    total INTEGER, succeeded INTEGER, failed INTEGER, skipped INTEGER, not_run INTEGER,
    answer TEXT,
    created TIMESTAMPTZ NOT NULL DEFAULT now(),
    shared JSONB,
    halted TEXT
);
CREATE INDEX IF NOT EXISTS tasks_pool ON tasks (pool_file, started);
CREATE TABLE IF NOT EXISTS runners (
    id TEXT PRIMARY KEY,
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started TIMESTAMPTZ NOT NULL DEFAULT now(),
    lease_until TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS runners_task ON runners (task);
-- Version 2: the calls a runner has in flight at most (--width); NULL: the task's cap.
ALTER TABLE runners ADD COLUMN IF NOT EXISTS width INTEGER;
-- Entries, details and rows are JSON (not JSONB): the answer keeps the order of their keys.
CREATE TABLE IF NOT EXISTS work (
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    num INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'call',
    row_first INTEGER,
    row_last INTEGER,
    size INTEGER NOT NULL DEFAULT 1,
    data JSON,
    deps INTEGER[] NOT NULL DEFAULT '{}',
    serial TEXT,
    state TEXT NOT NULL DEFAULT 'ready',
    runner TEXT,
    round INTEGER NOT NULL DEFAULT 1,
    doubted TEXT,
    key_text TEXT,
    step_id TEXT,
    status TEXT,
    entry JSON,
    detail JSON,
    doubt TEXT,
    sent_at TIMESTAMPTZ,
    done_at TIMESTAMPTZ,
    PRIMARY KEY (task, num, idx)
);
-- Version 2: the fencing epoch of the call's latest send; each send takes the next of the sequence,
-- so a runner that takes a call back sends it under a higher epoch than the runner it took it from.
ALTER TABLE work ADD COLUMN IF NOT EXISTS epoch BIGINT;
CREATE SEQUENCE IF NOT EXISTS pooler_epoch;
CREATE INDEX IF NOT EXISTS work_open ON work (task, state, num, idx) WHERE state <> 'done';
CREATE INDEX IF NOT EXISTS work_busy ON work (task) WHERE state IN ('claimed', 'sent');
CREATE INDEX IF NOT EXISTS work_serial ON work (task, serial, num, idx) WHERE serial IS NOT NULL;
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
CREATE TABLE IF NOT EXISTS table_rows (
    task TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    num INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    into_job TEXT,
    rows JSON NOT NULL,
    PRIMARY KEY (task, num, idx, name)
);
"""


def safe_url(url: str) -> str:
    """The URL with any password replaced by ``***``: it is printed in messages."""
    head, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url
    auth, _, host = rest.partition("@")
    user, colon, _ = auth.partition(":")
    return f"{head}://{user}{':***' if colon else ''}@{host}"


def _driver() -> Any:
    try:
        import psycopg  # noqa: PLC0415 - optional: only a PostgreSQL journal needs it
    except ImportError:
        raise JournalError("a PostgreSQL journal needs psycopg: pip install 'pooler[postgres]'") from None
    return psycopg


def connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection; ``JournalError`` naming the database (without its password)."""
    driver = _driver()
    try:
        conn: psycopg.Connection[Any] = driver.connect(url, autocommit=True, connect_timeout=10)
    except driver.Error as exc:
        raise JournalError(f"cannot reach the journal {safe_url(url)}: {_first_line(exc)}") from None
    return conn


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def version_of(conn: psycopg.Connection[Any]) -> int | None:
    """The schema version the database holds; None when it holds no pooler journal."""
    found = conn.execute("SELECT to_regclass('pooler_meta')").fetchone()
    if found is None or found[0] is None:
        return None
    row = conn.execute("SELECT value FROM pooler_meta WHERE name = 'schema_version'").fetchone()
    return int(row[0]) if row else None


def check_version(conn: psycopg.Connection[Any], url: str) -> None:
    """Refuse a database whose journal is missing or of another version."""
    found = version_of(conn)
    if found == SCHEMA_VERSION:
        return
    if found is None:
        raise JournalError(f"the database {safe_url(url)} holds no pooler journal yet - create it "
                           f"with: pooler journal upgrade --journal {safe_url(url)}")
    if found < SCHEMA_VERSION:
        raise JournalError(f"the journal {safe_url(url)} has schema version {found}, this pooler "
                           f"needs {SCHEMA_VERSION} - upgrade it with: pooler journal upgrade --journal "
                           f"{safe_url(url)} (stop every runner of it first)")
    raise JournalError(f"the journal {safe_url(url)} has schema version {found}, newer than this "
                       f"pooler's {SCHEMA_VERSION} - run a pooler as new as the one that upgraded it")


def upgrade(url: str) -> tuple[int | None, int]:
    """Create the journal's tables, or bring older ones to ``SCHEMA_VERSION``: (before, after)."""
    with connect(url) as conn, conn.transaction():
        # Two upgrades at once would race on CREATE: one waits for the other.
        conn.execute("SELECT pg_advisory_xact_lock(7446001)")
        before = version_of(conn)
        if before is not None and before > SCHEMA_VERSION:
            check_version(conn, url)
        conn.execute(_TABLES)
        conn.execute("INSERT INTO pooler_meta (name, value) VALUES ('schema_version', %s) "
                     "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))
    return before, SCHEMA_VERSION
