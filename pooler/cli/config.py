"""Named stores and where the token comes from.

A config file maps names to stores, so a cron line can say ``--store prod`` and keep the URL and
the token's file in one place, and the store's own limit on calls (``rate``), which every task and
every pooler process that calls it holds together::

    stores:
      prod: {url: "https://shop.example.com/mcp", token_file: "~/.config/pooler/prod.token",
             rate: {per_second: 20, burst: 5}}

The token itself never sits in the config file, only the path of the file that holds it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pooler.errors import InputError, UsageError, did_you_mean
from pooler.folders import config_dir
from pooler.infile import read_token, token_file_warning
from pooler.pool.rate import Rate

UNAUTHENTICATED = (
    "no token for the store {url}: give --token-file PATH, a token_file for the store in {config}, "
    "or set POOLER_TOKEN - every call would be refused (ACCESS_DENIED); nothing was sent"
)
NO_STORE = (
    "no store given: pass --store URL (or the name of a store from {config}), "
    "or set POOLER_STORE"
)


@dataclass(frozen=True)
class StoreEntry:
    """One named store of the config file."""

    name: str
    url: str
    token_file: Path | None = None
    #: The store's limit on calls, for every task that calls it (``rate: {per_second, burst}``).
    rate: Rate | None = None


@dataclass(frozen=True)
class Target:
    """The store to talk to and the token to show it (``None``: send none)."""

    url: str
    token: str | None
    name: str | None = None
    #: Things a person should hear about the token (a file others can read).
    warnings: tuple[str, ...] = ()
    #: The named store's ``rate``.
    rate: Rate | None = None

    def __repr__(self) -> str:
        # The token stays out of every repr, so no traceback or debug print can show it.
        return f"Target(url={self.url!r}, name={self.name!r}, token={'***' if self.token else None})"


def config_path(explicit: str | None, environ: Mapping[str, str]) -> Path:
    """``--config F``, else ``$POOLER_CONFIG``, else ``~/.config/pooler/stores.yaml``."""
    if explicit:
        return Path(explicit).expanduser()
    if environ.get("POOLER_CONFIG"):
        return Path(environ["POOLER_CONFIG"]).expanduser()
    return config_dir(environ) / "stores.yaml"


def load_stores(path: Path) -> dict[str, StoreEntry]:
    """The named stores of a config file; a missing file has none."""
    if not path.is_file():
        return {}
    # Imported only when there is a file to read: most runs name the store by URL, without one.
    import yaml  # noqa: PLC0415

    try:
        text = path.read_text(encoding="utf-8")
        data: Any = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the config file {path}: {exc}", file=str(path)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"the config file {path} is not valid YAML: {getattr(exc, 'problem', exc)}",
            file=str(path),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from exc
    rates = _refuse_unknown_keys(path, text)
    stores = (data or {}).get("stores") if isinstance(data, dict) else None
    if data is not None and not isinstance(stores, dict):
        raise InputError(
            f"the config file {path} needs a mapping 'stores: {{NAME: {{url: ..., token_file: ...}}}}'",
            file=str(path),
        )
    found: dict[str, StoreEntry] = {}
    for name, entry in (stores or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise InputError(f"store {name!r} in {path} needs a url: stores: {{{name}: {{url: URL}}}}",
                             file=str(path))
        token_file = entry.get("token_file")
        if token_file is not None and not isinstance(token_file, str):
            raise InputError(f"token_file of store {name!r} in {path} must be a path", file=str(path))
        found[str(name)] = StoreEntry(
            name=str(name),
            url=entry["url"],
            # A relative token_file is read from the config file's folder, not from where cron runs.
            token_file=(path.parent / Path(token_file).expanduser()) if token_file else None,
            rate=rates.get(str(name)),
        )
    return found


#: The keys a config file knows, at the top and in each store.
TOP_KEYS = ("stores",)
STORE_KEYS = ("url", "token_file", "rate")
RATE_KEYS = ("per_second", "burst")


def _refuse_unknown_keys(path: Path, text: str) -> dict[str, Rate]:
    """A misspelt key (``tokn_file:``) would be read as no key at all and every call refused later:
    it is refused here, at its line and column, with the key it was probably meant to be.  The
    stores' ``rate`` mappings are read here too, each problem at its spot; they are given back."""
    import yaml  # noqa: PLC0415 - only when a config file is read

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    rates: dict[str, Rate] = {}
    if not isinstance(root, yaml.MappingNode):
        return rates
    for key, value in root.value:
        _known(path, key, TOP_KEYS, "at the top of the config file")
        if key.value != "stores" or not isinstance(value, yaml.MappingNode):
            continue
        for name, entry in value.value:
            if isinstance(entry, yaml.MappingNode):
                for field, node in entry.value:
                    _known(path, field, STORE_KEYS, f"in the store {name.value!r}")
                    if field.value == "rate":
                        rates[str(name.value)] = _rate(path, str(name.value), node)
    return rates


def _rate(path: Path, store: str, node: Any) -> Rate:
    """A store's ``rate: {per_second: 20, burst: 5}``, with the bounds a pool's ``rate`` has."""
    import yaml  # noqa: PLC0415 - only when a config file is read

    def wrong(at: Any, field: str, what: str) -> InputError:
        return InputError(f"{field} of the store {store!r} {what}", file=str(path),
                          line=at.start_mark.line + 1, column=at.start_mark.column + 1,
                          path=f"stores.{store}.{field}")

    if not isinstance(node, yaml.MappingNode):
        raise wrong(node, "rate", "must be a mapping like {per_second: 20, burst: 5}")
    found: dict[str, Any] = {}
    for key, value in node.value:
        _known(path, key, RATE_KEYS, f"in the rate of the store {store!r}")
        found[str(key.value)] = (value, yaml.safe_load(yaml.serialize(value)))
    if "per_second" not in found:
        raise wrong(node, "rate", "needs per_second: the calls a second every task may start there together")
    at, per_second = found["per_second"]
    number = isinstance(per_second, int | float) and not isinstance(per_second, bool)
    if not number or not 0.01 <= per_second <= 10000:
        raise wrong(at, "rate.per_second", f"must be a number of calls a second from 0.01 to 10000, not "
                                           f"{at.value!r}")
    at, burst = found.get("burst", (None, 1))
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= 1000:
        raise wrong(at, "rate.burst", f"must be a whole number of calls from 1 to 1000, not {at.value!r}")
    return Rate(float(per_second), burst)


def _known(path: Path, key: Any, known: tuple[str, ...], where: str) -> None:
    word = str(key.value)
    if word in known:
        return
    hint = did_you_mean(word, known) or f" - the keys there: {', '.join(known)}"
    raise InputError(f"unknown key {word!r} {where}{hint}", file=str(path), line=key.start_mark.line + 1,
                     column=key.start_mark.column + 1)


def is_url(value: str) -> bool:
    return "://" in value


def resolve_target(
    store: str | None,
    token_file: str | None,
    config: str | None,
    environ: Mapping[str, str] | None = None,
) -> Target:
    """The store and token from the flags, the config file and the environment, in that order.

    The token: ``--token-file``, else the named store's ``token_file``, else ``$POOLER_TOKEN``.
    """
    env = os.environ if environ is None else environ
    cfg = config_path(config, env)
    wanted = store or env.get("POOLER_STORE") or None
    if not wanted:
        raise UsageError(NO_STORE.format(config=cfg))
    entry: StoreEntry | None = None
    if is_url(wanted):
        url = wanted
    else:
        stores = load_stores(cfg)
        entry = stores.get(wanted)
        if entry is None:
            known = ", ".join(sorted(stores)) or "none"
            raise UsageError(
                f"no store named {wanted!r} in {cfg} (known: {known}){did_you_mean(wanted, stores)} - "
                "give a URL like http://127.0.0.1:8080 or add the store under 'stores:' there"
            )
        url = entry.url
    file = Path(token_file) if token_file else entry.token_file if entry is not None else None
    token = read_token(file) if file is not None else env.get("POOLER_TOKEN") or None
    warning = token_file_warning(file) if file is not None else None
    return Target(url=url.rstrip("/"), token=token, name=entry.name if entry else None,
                  warnings=(warning,) if warning else (), rate=entry.rate if entry else None)
