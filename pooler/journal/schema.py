"""The one rule of a journal's schema version, on every backend: a journal newer than this pooler
is refused; an older one gets the numbered migrations after its version; one lacking a table,
column or function its version promises has the migrations run again from the first that made
what it lacks (each statement can run again on a journal that has it, and a later migration
that builds on the remade table, or drops what an earlier one made, runs after it again).  A
backend gives a ``Catalog``: its version, what it lacks, and a migration run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pooler.errors import JournalError
from pooler.journal.migrations import Migration


class Catalog(Protocol):
    """What the rule asks of a backend's database."""

    def version(self) -> int | None:
        """The schema version the journal records (None or 0: no journal yet)."""

    def lacking(self, migrations: list[Migration]) -> set[str]:
        """What the migrations make that the journal lacks (as ``Migration.makes`` names it)."""

    def apply(self, migration: Migration, version: int) -> None:
        """The migration's statements run, and ``version`` recorded with them."""


@dataclass(frozen=True)
class Upgraded:
    """What ``upgrade`` did: the version before (None: no journal), after, and what a journal
    lacking it had made again."""

    before: int | None
    after: int
    remade: tuple[str, ...] = ()


def named(migrations: list[Migration], gone: set[str], upto: int | None = None) -> list[str]:
    """What a journal lacks as messages name it, in the order the migrations made it (up to the
    migration ``upto``); a function a later migration makes again is named once."""
    return list(dict.fromkeys(f"{name}()" if name in m.functions else name for m in migrations
                              if upto is None or m.number <= upto for name in m.makes if name in gone))


def newer(where: str, found: int, last: int, then: str) -> JournalError:
    return JournalError(f"the journal {where} has schema version {found}, newer than this pooler's {last} - "
                        f"run a pooler as new as the one that {then}")


def upgrade(db: Catalog, migrations: list[Migration], where: str, then: str) -> Upgraded:
    """The journal brought to the last migration's version (``then``: what a newer journal's
    message advises after "the one that")."""
    last = migrations[-1].number
    before = db.version()
    if before is not None and before > last:
        raise newer(where, before, last, then)
    done = before or 0
    gone = db.lacking(migrations) if done else set()
    again = min((m.number for m in migrations if gone.intersection(m.makes)), default=done + 1)
    for migration in migrations:
        if migration.number > done or migration.number >= again:
            db.apply(migration, max(done, migration.number))
    return Upgraded(before, last, tuple(named(migrations, gone, done)))


def check(db: Catalog, migrations: list[Migration], where: str, command: str) -> None:
    """Refuse a journal upgraded only by ``command`` when it is missing, of another version, or
    lacking what its version promises."""
    found, last = db.version(), migrations[-1].number
    upgrade_it = f"upgrade it with: {command} (stop every runner of it first)"
    if found is None:
        raise JournalError(f"the database {where} holds no pooler journal yet - create it with: {command}")
    if found < last:
        raise JournalError(f"the journal {where} has schema version {found}, this pooler needs {last} - "
                           f"{upgrade_it}")
    if found > last:
        raise newer(where, found, last, "upgraded it")
    gone = db.lacking(migrations)
    if gone:
        raise JournalError(f"the journal {where} has schema version {found} but lacks "
                           f"{', '.join(named(migrations, gone))} - {upgrade_it}")
