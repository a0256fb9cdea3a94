"""``--store-rate`` and a named store's ``rate`` (stores.yaml): the store's limit a run holds
together with every task and every pooler process that calls the store, and the journal that
keeps its bucket."""

from __future__ import annotations

import argparse

from pooler.cli.commands.common import Context, calls_a_second
from pooler.cli.config import config_path, is_url, load_stores
from pooler.journal.dburl import is_postgres
from pooler.journal.records import default_journal_path
from pooler.pool.rate import Rate
from pooler.run.storerate import StoreRate


def add_store_rate(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--store-rate", type=calls_a_second, metavar="N",
                        help="start at most N calls a second at the store, together with every other task "
                             "and pooler process that calls it, each task with a fair share (in place of "
                             "the per_second of the named store's rate in the config file; default: that "
                             "rate, else no limit)")


def store_rate(args: argparse.Namespace, ctx: Context, journal: str) -> StoreRate | None:
    """The store's limit (``--store-rate`` over the named store's ``rate``, whose burst it keeps)
    and where its bucket is: a PostgreSQL journal's own database (every host that shares it), else
    the default journal of the state folder, whichever SQLite journal the run keeps, so every
    process of this host meets in one bucket."""
    wanted = args.store or ctx.environ.get("POOLER_STORE")
    named = None
    if wanted and not is_url(wanted):
        path = config_path(args.config, ctx.environ)
        named = load_stores(path).get(wanted)
    rate = named.rate if named is not None else None
    given = getattr(args, "store_rate", None)
    if given is not None:
        if rate is not None and named is not None:
            ctx.note(f"pooler: --store-rate {given:g} overrides rate.per_second: {rate.per_second:g} of the "
                     f"store {named.name!r} in {config_path(args.config, ctx.environ)}")
        rate = Rate(given, rate.burst if rate is not None else 1)
    if rate is None:
        return None
    return StoreRate(rate, journal if is_postgres(journal) else str(default_journal_path(ctx.environ)))
