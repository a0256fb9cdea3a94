"""What a loaded pool is: plain dataclasses shared by the checks, the executor and the CLI.

The loader builds these from YAML or JSON and records where every value stood in its file
(``Source.positions``), so any later stage can point at the spot without reopening the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pooler.errors import Problem
from pooler.pool.breaker import DEFAULT_BREAKER, BreakerRule
from pooler.pool.budget import Budgets, Tolerate, budgets_of
from pooler.pool.rate import Pace, Rate, paces
from pooler.pool.rules import RESERVED

#: A path into a loaded document: mapping keys and list indexes, from the top.
JsonPath = tuple[str | int, ...]

Mode = Literal["sequential", "parallel"]
MODES: tuple[str, ...] = ("sequential", "parallel")

#: Names a step may not take, because ``${...}`` uses them for something else.
RESERVED_NAMES: frozenset[str] = frozenset(RESERVED)


@dataclass(frozen=True)
class Pos:
    """A 1-based line and column."""

    line: int
    column: int


@dataclass
class Source:
    """A file as it was loaded: its lines, and the position of every value by JSON path."""

    file: str
    lines: list[str] = field(default_factory=list)
    positions: dict[JsonPath, Pos] = field(default_factory=dict)

    def pos(self, path: JsonPath) -> Pos | None:
        """The position of ``path``, or of its nearest ancestor that has one."""
        for cut in range(len(path), -1, -1):
            found = self.positions.get(path[:cut])
            if found is not None:
                return found
        return None

    def problem(self, message: str, path: JsonPath = (), *, step: int | None = None,
                within: re.Pattern[str] | None = None) -> Problem:
        """A problem that points at ``path`` in this file, with the line's text for the caret.

        With ``within``, the caret goes to the first match of it in the value's line from the
        value on (``${skuu}`` inside a longer string), or stays at the value's start.
        """
        where = self.pos(path)
        line = where.line if where else None
        text = self.lines[line - 1] if line and 0 < line <= len(self.lines) else None
        column = where.column if where else None
        if within is not None and text is not None and column is not None:
            found = within.search(text, column - 1)
            column = found.start() + 1 if found else column
        return Problem(
            message,
            file=self.file,
            line=line,
            column=column,
            step=step,
            path=format_path(path),
            source_line=text,
        )


def format_path(path: JsonPath) -> str:
    """``pool[2].params.name``: how a path reads in a message."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True)
class Options:
    """The batch options of execute_tool_batch, with its defaults."""

    mode: Mode = "sequential"
    max_concurrency: int = 4
    serialize_on: str | None = None
    stop_on_error: bool = True
    include_results: bool = True
    #: The width grows from 2 toward max_concurrency while answers come back clean, and is cut
    #: back on busy and gateway answers, never on latency alone; busy answers set a pace (run/flow.py).
    adaptive: bool = False


@dataclass(frozen=True)
class Retry:
    """How often a step is tried again, and after what.

    A call that surely never reached the store is always safe to try again; one whose answer was
    lost (``in_doubt``) is tried again only when ``on_in_doubt`` is set, since only a key makes
    that safe.
    """

    attempts: int = 1
    backoff_ms: int = 200
    on_in_doubt: bool = False
    #: Seconds a call answered busy (429, 503 with Retry-After) is sent again behind the task's
    #: pause, without using an attempt; None: the pool's, else ``DEFAULT_BUSY_FOR``.
    busy_for: float | None = None
    #: Refusals that mean the store is busy (texts a refusal's message contains, or /regular
    #: expressions/): sent again under the key's next round, within ``attempts``.
    refusals: tuple[str, ...] = ()


#: How long (seconds) a call answered busy is sent again when no ``busy_for`` says.
DEFAULT_BUSY_FOR = 600.0


@dataclass(frozen=True)
class Probe:
    """How to find out whether a call of the step landed: a read sent when the call is in doubt
    (never under the call's Idempotency-Key).

    ``landed`` names the field of the probe's detail that is true when the call landed; ``detail``,
    the field that stands for the call's detail then (None: the call's detail is not known).
    """

    command: str
    landed: str
    #: The probe's tool, when not the step's own.
    unit: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    detail: str | None = None


@dataclass(frozen=True)
class Compare:
    """A read of the store's own rows that the step's rows are compared with before anything is
    sent: a row whose ``match`` finds no table row is new, one whose ``fields`` differ is changed,
    and the rest are unchanged (counted, never sent).

    ``match`` and ``fields`` map a row's field (as ``${row.x}`` names it) to the table's column.
    """

    command: str
    table: str
    match: dict[str, str]
    fields: dict[str, str]
    #: The read's tool, when not the step's own.
    unit: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Variable:
    """A declared variable: a default, or a value from the environment or a file."""

    name: str
    description: str = ""
    has_default: bool = False
    default: Any = None
    env: str | None = None
    #: True or False as declared; None when not declared (then a value from the environment is secret).
    secret: bool | None = None


@dataclass(frozen=True)
class ForEach:
    """A step that runs once per row (or once per chunk of rows) of a data source.

    Exactly one of ``file`` and ``step`` is set.  With ``chunk``, each call sends up to ``chunk``
    rows as the list in its params field ``field``.
    """

    file: str | None = None
    step: str | None = None
    table: str | None = None
    format: str | None = None
    chunk: int | None = None
    field: str | None = None
    #: CSV only: the character between fields (a comma by default).
    delimiter: str | None = None
    #: The file's text encoding (utf-8 by default).
    encoding: str | None = None
    #: CSV only: the decimal separator its numbers are written with ("." or ","); given, a value
    #: that is wholly a number and fills a whole ``${row.x}`` is sent as that number.
    decimal: str | None = None
    #: An empty source is fine: without it, a source with no rows fails the run (an empty feed
    #: must not pass for a nightly import that completed).
    allow_empty: bool = False


@dataclass
class Step:
    """One call of a store's AI tool, as the pool file declares it (before any resolution)."""

    num: int
    unit: str
    command: str
    name: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    debug: bool = False
    into: str | None = None
    key: str | None = None
    retry: Retry | None = None
    for_each: ForEach | None = None
    probe: Probe | None = None
    #: The store's rows read first, so that only new and changed rows are sent.
    compare: Compare | None = None
    #: With ``for_each.chunk``: the shape of each row the chunk sends, filled like params from
    #: ``${row.x}`` (None: the rows go as the source holds them).
    chunk_row: dict[str, Any] | None = None
    description: str = ""
    #: The step's error budget (``tolerate``): it wins over the pool's.
    tolerate: Tolerate | None = None
    #: The step's own limit on calls started (``rate``): it wins over the pool's.
    rate: Rate | None = None
    #: Where the step stands in ``source``: ``("pool", 0)``, or ``(0,)`` in a pool_source file.
    path: JsonPath = ()
    source: Source | None = None

    @property
    def probe_unit(self) -> str:
        """The unit the step's probe is sent to: its own, else the step's."""
        return (self.probe.unit if self.probe is not None and self.probe.unit else "") or self.unit

    @property
    def compare_unit(self) -> str:
        """The unit the step's compare reads from: its own, else the step's."""
        return (self.compare.unit if self.compare is not None and self.compare.unit else "") or self.unit

    @property
    def label(self) -> str:
        """How the step is named to a person: its name, or its number."""
        return self.name or f"#{self.num}"

    def problem(self, message: str, *sub: str | int, within: re.Pattern[str] | None = None) -> Problem:
        """A problem pointing into this step (``sub`` is a path below the step; ``within`` as for
        ``Source.problem``)."""
        if self.source is None:
            return Problem(message, step=self.num)
        return self.source.problem(message, (*self.path, *sub), step=self.num, within=within)


@dataclass
class Pool:
    """A loaded pool file."""

    file: str
    steps: list[Step]
    options: Options = field(default_factory=Options)
    description: str = ""
    variables: dict[str, Variable] = field(default_factory=dict)
    source: Source | None = None
    #: Which option names the file set itself (command-line flags override the rest silently).
    options_set: frozenset[str] = frozenset()
    #: The pool's error budget (``tolerate`` at the top level).
    tolerate: Tolerate | None = None
    #: The pool's limit on calls started (``rate`` at the top level, or ``--rate``).
    rate: Rate | None = None
    #: When a store that looks down stops the run (``breaker``); None: never (``breaker: false``).
    breaker: BreakerRule | None = DEFAULT_BREAKER
    #: The pool's ``retry: {busy_for}``: for the steps without one of their own; None: the default.
    busy_for: float | None = None
    #: The folder relative data files and ``{"file": ...}`` fields are read from; None: the pool
    #: file's own folder.  A pool built in memory has no folder of its own to go by.
    base: str | None = None
    #: What the loader found wrong (``load_pool(..., partial=True)``): the compile step tells it
    #: together with the meaning problems, so one check shows everything.
    problems: tuple[Problem, ...] = ()
    #: The steps (by number) those problems leave unreadable: they stand in the pool by name only.
    broken: frozenset[int] = frozenset()
    #: False when the pool's declarations cannot be read (``vars`` is not a mapping): then only
    #: ``problems`` are told, since every meaning check would speak from a wrong premise.
    readable: bool = True
    #: The pool as one document (``pool_source`` and ``params_source`` read in): what a task keeps
    #: of it, so that a redrive needs no file.  None for a pool built in memory.
    document: dict[str, Any] | None = None

    def budgets(self) -> Budgets:
        """The pool's error budgets, its steps' own first."""
        return budgets_of(self.tolerate, [(s.num, s.tolerate) for s in self.steps])

    def paces(self) -> dict[int, Pace]:
        """Each step's limit on calls started, and its bucket."""
        return paces(self.rate, [(s.num, s.rate) for s in self.steps])

    def patience(self, step: Step) -> float:
        """Seconds a call of ``step`` answered busy is sent again: its own ``busy_for``, the pool's,
        or the default."""
        own = step.retry.busy_for if step.retry is not None else None
        for seconds in (own, self.busy_for):
            if seconds is not None:
                return float(seconds)
        return DEFAULT_BUSY_FOR

    def data_folder(self) -> Path:
        """The folder the pool's relative data files are read from: the loader's, else the file's."""
        return Path(self.base).absolute() if self.base is not None else Path(self.file).absolute().parent

    def step_named(self, name: str) -> Step | None:
        """The step with that name, case not told apart (the seed's rule for names)."""
        low = name.lower()
        for step in self.steps:
            if step.name and step.name.lower() == low:
                return step
        return None


Value = Any
"""A JSON value: dict, list, str, int, float, bool or None."""
