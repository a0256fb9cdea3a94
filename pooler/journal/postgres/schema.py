"""The journal's tables on PostgreSQL: their version and catalog, and the one command that creates or
upgrades them (``pooler journal upgrade``) from the numbered migrations in ``sql/migrations``.  A
journal of another version, or one lacking a table or function its version promises, is refused
when it is opened, before anything is planned (the rule is ``pooler.journal.schema``'s)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pooler.errors import JournalError
from pooler.journal import schema
from pooler.journal.dburl import DbText, argument, shown
from pooler.journal.migrations import Migration, promised, read_migrations
from pooler.journal.queries import read_queries

if TYPE_CHECKING:
    import psycopg

#: The journal's SQL: ``migrations/NNNN_what.sql``, applied in the order of their numbers.
MIGRATIONS_DIR = Path(__file__).with_name("sql") / "migrations"
#: The journal's queries, by name (``sql/queries.sql``).
SQL = read_queries(Path(__file__).with_name("sql") / "queries.sql")
MIGRATIONS = read_migrations(MIGRATIONS_DIR)
#: The schema version this pooler needs: the number of the last migration, so it changes whenever
#: the schema does.  ``pooler journal upgrade`` brings an older journal to it.
SCHEMA_VERSION = MIGRATIONS[-1].number


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
        text = DbText(url)
        raise JournalError(f"cannot reach the journal {text.shown}: {text.error(exc)}") from None
    return conn


def absent(conn: psycopg.Connection[Any], migrations: list[Migration] = MIGRATIONS) -> set[str]:
    """The tables and functions of the migrations the database lacks, from its catalog in one
    round trip."""
    row = conn.execute(
        "SELECT ARRAY(SELECT t FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NULL) || "
        "ARRAY(SELECT f FROM unnest(%s::text[]) f WHERE NOT EXISTS (SELECT 1 FROM pg_proc p "
        "WHERE p.proname = f AND p.pronamespace = ANY(current_schemas(false)::regnamespace[])))",
        ([t for m in migrations for t in m.tables], promised(migrations))).fetchone()
    (names,) = row if row is not None else ([],)
    return set(names)


class Catalog:
    """The database's version (``pooler_meta``) and catalog, for the schema's rule
    (``pooler.journal.schema``): each migration in a transaction of its own, which also records
    the version it reaches, so an upgrade stopped half-way leaves a journal of the version it says."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def version(self) -> int | None:
        """None when the database holds no pooler journal."""
        found = self.conn.execute("SELECT to_regclass('pooler_meta')").fetchone()
        if found is None or found[0] is None:
            return None
        row = self.conn.execute("SELECT value FROM pooler_meta WHERE name = 'schema_version'").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def lacking(self, migrations: list[Migration]) -> set[str]:
        return absent(self.conn, migrations)

    def apply(self, migration: Migration, version: int) -> None:
        with self.conn.transaction():
            self.conn.execute(migration.sql)
            self.conn.execute("INSERT INTO pooler_meta (name, value) VALUES ('schema_version', %s) "
                              "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (str(version),))


def check_version(conn: psycopg.Connection[Any], url: str) -> None:
    """Refuse a database whose journal is missing, of another version, or lacking what its version
    promises (its tables and functions, looked up in the catalog once per open)."""
    schema.check(Catalog(conn), MIGRATIONS, shown(url), f"pooler journal upgrade --journal {argument(url)}")


def upgrade(url: str, migrations: list[Migration] | None = None) -> schema.Upgraded:
    """Create the journal, or bring an older one to the last migration's version
    (``pooler journal upgrade``)."""
    with connect(url) as conn:
        try:
            # Two upgrades at once would race on CREATE: one waits for the other (the lock is the
            # connection's, let go when it closes).
            conn.execute("SELECT pg_advisory_lock(7446001)")
            return schema.upgrade(Catalog(conn), migrations or MIGRATIONS, shown(url), "upgraded it")
        except _driver().Error as exc:
            text = DbText(url)
            raise JournalError(f"the upgrade of the journal {text.shown} failed: {text.error(exc)}") from None
