"""What a saved plan was made from, as sha256 digests: the pool file, its steps, every data file and
``{"file": ...}`` field, each variable that is no secret, and the store's declarations of the units
it calls.  ``pooler plan`` writes them, ``pooler apply`` and ``pooler show`` compare them with the
files as they are now, and so does the MCP server's commit of a plan: one rule for every plan.

A secret is never digested: a short secret's sha256 is as good as the secret to anyone who tries
the likely values, so a plan only names the secrets to give again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from pooler.pool.datafiles import data_path, locate
from pooler.pool.model import Pool
from pooler.run.planfiles import digest, shown
from pooler.run.workplan import fingerprint

#: The kinds of digest, in the order a plan lists them.
POOL, STEPS, OPTIONS, DATA, FILE, VARIABLE, DECLARATIONS = (
    "pool", "steps", "options", "data", "file", "variable", "declarations")
#: The digest of a file that is not there.
MISSING = "missing"


class Digest(TypedDict):
    """One thing a plan was made from: its kind, its name as messages tell it, its sha256."""

    what: str
    name: str
    sha256: str


def text_digest(value: Any) -> str:
    """The sha256 of a value's canonical JSON: equal values, equal digests."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _file_digest(path: Path) -> str:
    try:
        return digest(path)
    except OSError:
        return MISSING


def units_of(pool: Pool) -> set[str]:
    """The units a pool calls, its probes' and compares' reads included."""
    units = {step.unit for step in pool.steps}
    for step in pool.steps:
        for read in (step.probe, getattr(step, "compare", None)):
            unit = getattr(read, "unit", None)
            if isinstance(unit, str):
                units.add(unit)
    return units


def declarations(pool: Pool, tools: Iterable[Mapping[str, Any]]) -> str:
    """The digest of the store's declarations of the units the pool calls (a tool it does not call
    may change without making the plan stale)."""
    units = {u.upper() for u in units_of(pool)}
    used = sorted((t for t in tools if str(t.get("unit", "")).upper() in units),
                  key=lambda t: str(t.get("unit", "")))
    return text_digest(used)


def _param_files(pool: Pool) -> list[tuple[str, Path]]:
    """The files a step's params name as ``{"file": ...}`` (read only when the call is sent)."""
    found = []
    for step in pool.steps:
        for value in (step.params or {}).values():
            if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("file"), str):
                found.append((value["file"], data_path(pool, value["file"])))
    return found


def plan_digests(pool: Pool, values: Mapping[str, Any] | None, secret_names: Iterable[str] = (), *,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> list[Digest]:
    """Everything the plan of ``pool`` depends on, with the variables' ``values`` (none: a pool
    without variables) and the store's ``tools`` (none: not asked)."""
    found: list[Digest] = []
    path = Path(pool.file)
    if path.is_file():
        found.append({"what": POOL, "name": str(pool.file), "sha256": digest(path)})
    # pool_source and params_source are read into the steps: their digest tells them changed.
    found.append({"what": STEPS, "name": "the steps", "sha256": fingerprint(pool)})
    options = {"options": dataclasses.asdict(pool.options),
               "rate": None if pool.rate is None else dataclasses.asdict(pool.rate)}
    found.append({"what": OPTIONS, "name": "the options", "sha256": text_digest(options)})
    # A file two steps read is one thing the plan was made from.
    seen: set[tuple[str, str]] = set()
    for step in pool.steps:
        data, _ = locate(pool, step, values, fields=False)
        if data is not None and (DATA, shown(pool, data.path)) not in seen:
            seen.add((DATA, shown(pool, data.path)))
            found.append({"what": DATA, "name": shown(pool, data.path), "sha256": _file_digest(data.path)})
    for name, file in _param_files(pool):
        if (FILE, name) not in seen:
            seen.add((FILE, name))
            found.append({"what": FILE, "name": name, "sha256": _file_digest(file)})
    secret = set(secret_names) | {n for n, v in pool.variables.items() if v.secret}
    for name, value in sorted((values or {}).items()):
        if name not in secret:
            found.append({"what": VARIABLE, "name": name, "sha256": text_digest(value)})
    if tools is not None:
        found.append({"what": DECLARATIONS, "name": "the store's declarations",
                      "sha256": declarations(pool, tools)})
    return found


def _short(sha: str) -> str:
    return sha if sha == MISSING else sha[:12] + "…"


def label(found: Digest) -> str:
    """What a digest is of, as messages name it."""
    what, name = found["what"], found["name"]
    if what == VARIABLE:
        return f"the variable {name}"
    if what == STEPS:
        return "the steps (with their pool_source and params_source files)"
    if what == POOL:
        return f"the pool file {name}"
    return name


def _sentence(then: Digest, now: Digest | None) -> str:
    what, subject = then["what"], label(then)
    if now is None or now["sha256"] == MISSING:
        gone = "is not given now" if what == VARIABLE else "is not there now"
        return f"{subject} {gone} (sha256 {_short(then['sha256'])} when planned)"
    return (f"{subject} changed since the plan (sha256 {_short(then['sha256'])} when planned, "
            f"{_short(now['sha256'])} now)")


def stale(then: Sequence[Digest], now: Sequence[Digest]) -> list[str]:
    """What changed since the plan, a sentence each, in the plan's order; empty when nothing did.
    A digest the plan lacks (a variable given now that it did not have) is a change too."""
    current = {(d["what"], d["name"]): d for d in now}
    told = []
    for was in then:
        found = current.pop((was["what"], was["name"]), None)
        if found is None and was["what"] == DECLARATIONS:
            continue  # not asked now (``pooler show`` offline): not told as changed
        if found is None or found["sha256"] != was["sha256"]:
            told.append(_sentence(was, found))
    for extra in current.values():
        if extra["what"] == VARIABLE:
            told.append(f"the variable {extra['name']} is given now and was not when planned")
        elif extra["what"] in (DATA, FILE):
            told.append(f"{extra['name']} is read now and was not when planned")
    return told
