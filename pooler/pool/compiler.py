"""The one compile step: a loaded pool, its variables and data files become a ``Plan``, or every
problem at once, each at its file:line:column.

The stages, in order: the loader (YAML/JSON with positions, the schema, the seed's refusals; loaded
with ``partial=True`` a pool with such problems comes here with them, and they are told together
with the rest), the meaning checks (``checks``), the variables, the
store's tools (``--against``), the data files (where, their fields, and read whole their rows and
keys).  ``check``, ``run --dry-run``, ``run`` and the MCP server's ``tool_pool`` all build their
plan here, so what one accepts the others accept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pooler.errors import CheckFailed, PoolerError, Problem, UsageError, in_order
from pooler.pool.against import Declared, check_against, field_types, unshaped_rows
from pooler.pool.checks import NearMiss, check_pool, near_misses
from pooler.pool.datafiles import DataFile, RowSink, data_path, locate, read_whole
from pooler.pool.keyset import KeySet
from pooler.pool.loader import load_pool
from pooler.pool.model import Pool, Step
from pooler.pool.references import parse_ref
from pooler.pool.rules import jsonl_files
from pooler.pool.variables import OPEN, Variables, resolve_variables, strings, substitute


@dataclass(frozen=True)
class Inputs:
    """Where variable values come from: ``--var``, ``--vars-file`` and the environment."""

    overrides: Mapping[str, str] = field(default_factory=dict)
    vars_file: Path | None = None
    environ: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    """A pool that passed every check, with what a run needs worked out once."""

    pool: Pool
    #: None when no variable inputs were given (``check`` without ``--var``, ``--vars-file``, ``--env``).
    variables: Variables | None
    #: The data file of every step over a file, by step number.
    data: dict[int, DataFile] = field(default_factory=dict)
    #: Whether every data file was read whole (rows counted, every row's key known).
    whole: bool = False
    sample: int | None = None
    #: tool_pool (the seed's words of data): the references that nearly name a step, sent as text.
    notes: list[NearMiss] = field(default_factory=list)


def compile_pool(pool: Pool, *, inputs: Inputs | None = None, values: Mapping[str, Any] | None = None,
                 tools: list[dict[str, Any]] | None = None, read_data: bool = True,
                 sample: int | None = None, seed_words: bool = False, checks: bool = True,
                 data_files: bool = True, rows: RowSink | None = None) -> Plan:
    """The plan of ``pool``; ``CheckFailed`` with every problem when there is any.

    Variables come from ``inputs`` (resolved here) or are given resolved as ``values``; with neither
    they are not known, and what depends on their values is left out (a plain ``check``).  ``tools``
    (a store's tool_list) adds the checks against the store.  ``read_data`` reads every row of the
    data files (up to ``sample`` rows each); without it only their fields are read.  ``seed_words``
    keeps the seed's rule that an ``@word`` naming no earlier step is a word of data (tool_pool).
    ``checks=False`` only finds the data files (for a caller that checked the pool itself).
    ``data_files=False`` leaves the ``for_each`` files alone (neither located nor read): a runner
    joining a shared task gets its rows from the PostgreSQL journal, not from a file of its own.
    ``rows`` takes every row of the data files as the check reads it (a run writes its plan from
    them); with ``sample``, the first ``sample`` rows of each, as many as the check reads.
    """
    problems: list[Problem] = list(pool.problems)
    if not pool.readable:
        raise CheckFailed(problems)
    variables: Variables | None = None
    if values is not None:
        variables = Variables(values=dict(values))
    elif inputs is not None:
        variables, found = _variables(pool, inputs)
        problems.extend(found)
    meaning = check_pool(pool, variables.values if variables is not None else None) if checks else []
    if seed_words:
        words = words_of_data(pool)
        meaning = [p for p in meaning if not any(p.step == num and p.message.startswith(text)
                                                 for num, text in words)]
    # A step the loader could not read speaks through its loader problems alone.
    problems.extend(p for p in meaning if p.step not in pool.broken)
    if data_files:
        # With the store's declarations, every value a row puts into a declared field is checked.
        types = field_types(pool, tools) if tools is not None else {}
        sink = rows if variables is not None else None
        if sink is not None and variables is not None:
            sink.begin(variables.values, variables.secrets)
        data, data_problems = _data_files(pool, variables, read_data=read_data and checks, sample=sample,
                                          fields=checks, types=types, sink=sink)
    else:
        # The files a call's params name are still read by this process, when it sends the call.
        data, data_problems = {}, [p for step in pool.steps for p in _jsonl_fields(pool, step)]
    problems = in_order([*problems, *data_problems], pool.file)
    if tools is not None:
        # The store's word on each step comes after what the pool itself says, in the store's order.
        # A step the loader told about is not what its author meant yet: the store's word on it
        # (a field "missing" from params the loader could not read) would only be noise.
        told = {p.step for p in pool.problems}
        problems.extend(p for p in check_against(pool, tools) if p.step not in told)
    if problems:
        raise CheckFailed(list(dict.fromkeys(problems)))
    return Plan(pool=pool, variables=variables, data=data, whole=read_data and checks and data_files,
                sample=sample, notes=near_misses(pool) if seed_words else [])


# What each caller needs of the compile step, by name: a caller says what it does, not which of
# compile_pool's switches it sets, and a switch changed here changes every caller of that need.

def plan_for_check(pool: Pool, inputs: Inputs | None = None, *, tools: list[dict[str, Any]] | None = None,
                   read_data: bool = True) -> Plan:
    """``pooler check``: every check; the rows read only when ``read_data`` (``--data``)."""
    return compile_pool(pool, inputs=inputs, tools=tools, read_data=read_data)


@dataclass
class Checked:
    """``pooler check``'s pass over one file: its problems, the pool as loaded (None when it could
    not be read) and, when it passed, its plan."""

    problems: list[Problem]
    pool: Pool | None = None
    plan: Plan | None = None


def check_file(path: str, inputs: Inputs | None = None, *, tools: list[dict[str, Any]] | None = None,
               read_data: bool = False, text: str | None = None,
               loaded: Callable[[Pool], None] | None = None) -> Checked:
    """Every problem of one pool file, as ``pooler check`` and the language server tell them: the
    file loaded (``text``: as an editor holds it, unsaved) and compiled by ``plan_for_check``.
    ``loaded`` sees the pool before it is compiled (check masks its secret variables there)."""
    try:
        pool = load_pool(path, partial=True, text=text)
    except PoolerError as exc:
        return Checked(list(exc.problems()))
    if loaded is not None:
        loaded(pool)
    try:
        plan = plan_for_check(pool, inputs, tools=tools, read_data=read_data)
    except PoolerError as exc:
        return Checked(list(exc.problems()), pool)
    return Checked([], pool, plan)


def plan_for_run(pool: Pool, inputs: Inputs, *, sample: int | None = None, data_files: bool = True,
                 rows: RowSink | None = None, tools: list[dict[str, Any]] | None = None) -> Plan:
    """``pooler run``: every check, the data files read (up to ``sample`` rows each), each row
    handed to ``rows`` as it is checked (the task's plan; not with ``sample``: a sampled run plans
    every row of its files, more than the check reads); without ``data_files`` the rows come from
    a journal (a shared task, or a task's recorded plan); with ``tools`` (``pooler plan``) checked
    against the store's declarations as well."""
    return compile_pool(pool, inputs=inputs, sample=sample, data_files=data_files,
                        rows=rows if sample is None else None, tools=tools)


def plan_for_tool_pool(pool: Pool, tools: list[dict[str, Any]] | None) -> Plan:
    """The MCP server's ``tool_pool``: no variables, the store's tools, and the seed's words of data."""
    return compile_pool(pool, values={}, seed_words=True, tools=tools)


def plan_for_joining_runner(pool: Pool, values: Mapping[str, Any], sample: int | None, *,
                            rows: RowSink | None = None, checks: bool = True) -> Plan:
    """A runner that plans (or widens) a task: every check and every row read (up to ``sample``
    rows each), with the variables it runs with, each row handed to ``rows`` as it is checked (the
    task's work rows, committed only once the check has passed).  ``checks=False``: a caller that
    checked the pool itself (``run_pool``); its data files are found and read, not checked."""
    return compile_pool(pool, values=values, sample=sample, rows=rows, checks=checks)


def data_of(pool: Pool, values: Mapping[str, Any], sample: int | None) -> Plan:
    """The data files of a pool its caller has checked already (``run_pool``): found, not checked."""
    return compile_pool(pool, values=values, sample=sample, checks=False)


def _variables(pool: Pool, inputs: Inputs) -> tuple[Variables | None, list[Problem]]:
    try:
        return resolve_variables(pool, inputs.overrides, inputs.vars_file, inputs.environ), []
    except UsageError:
        raise  # a --var the pool does not declare is the command line's slip, told alone
    except PoolerError as exc:
        return None, list(exc.problems())


def _data_files(pool: Pool, variables: Variables | None, *, read_data: bool, sample: int | None,
                fields: bool, types: Mapping[int, Declared] | None = None,
                sink: RowSink | None = None) -> tuple[dict[int, DataFile], list[Problem]]:
    values = variables.values if variables is not None else None
    # Variables not given (a plain check): rows are still read, with the defaults the pool declares;
    # a key that needs a variable without one is then left unchecked.
    known = values if values is not None else {
        n: v.default for n, v in pool.variables.items() if v.has_default}
    found: dict[int, DataFile] = {}
    problems: list[Problem] = []
    with KeySet() as keys:
        for step in pool.steps:
            if isinstance(step.key, str) and step.for_each is None and values is not None:
                _literal_key(step, values, keys)
            problems.extend(_jsonl_fields(pool, step))
            data, wrong = locate(pool, step, values, fields=fields)
            problems.extend(wrong)
            if data is None:
                continue
            found[step.num] = data
            declared = (types or {}).get(step.num)
            unshaped = unshaped_rows(step, declared, data.path, data.fields) \
                if declared is not None and data.fields is not None else None
            if unshaped is not None:
                problems.append(unshaped)
            if read_data:
                # A field the header lacks is told once above, not again for every row.
                problems.extend(read_whole(step, data, known, keys, sample, partial=values is None,
                                           rows=not wrong and unshaped is None, declared=declared,
                                           sink=sink))
                fe = step.for_each
                if data.rows == 0 and not wrong and fe is not None and not fe.allow_empty:
                    problems.append(empty_source(step, f"the file {data.path}"))
    return found, problems


def empty_source(step: Step, source: str) -> Problem:
    """A step over rows whose source has none: an empty feed must not pass for a completed import."""
    return step.problem(f"for_each of step {step.num} has no rows: {source} is empty - a run over no rows "
                        "would pass for a completed import. Write allow_empty: true under for_each if an "
                        "empty source is fine.", "for_each")


def _literal_key(step: Any, values: Mapping[str, Any], keys: KeySet) -> None:
    """A step's own key joins the set, so a row's key that equals it is found; two equal literal keys
    are told by the checks already."""
    try:
        key = str(substitute(step.key, values)) if OPEN in step.key else step.key
    except PoolerError:
        return
    keys.add(key, step.num, None)


def _jsonl_fields(pool: Pool, step: Any) -> list[Problem]:
    """A params field written ``{"file": "rows.jsonl"}`` names a file that must be there."""
    problems = []
    for name, file in jsonl_files(step.params):
        if OPEN in file:
            continue  # a templated name is only known per call
        path = data_path(pool, file)
        if not path.is_file():
            problems.append(step.problem(f"No such file: {path} - params.{name}.file of step {step.num} is "
                                         "read relative to the pool file's folder.", "params", name, "file"))
    return problems


def words_of_data(pool: Pool) -> set[tuple[int, str]]:
    """The params strings the seed sends as they are: ``@...`` naming no step before its own.

    A pool file's checks report these as slips; tool_pool's seed calls them words of data (an
    address like ``@shop.example``), so for an agent they are not refused.  By step, with the text.
    """
    found: set[tuple[int, str]] = set()
    for step in pool.steps:
        earlier = {s.name.lower() for s in pool.steps if s.name and s.num < step.num}
        for _, text in strings(step.params, ()):
            if not text.startswith("@") or text.startswith("@@"):
                continue
            parsed = parse_ref(text)
            if parsed is None or parsed[0].lower() not in earlier:
                found.add((step.num, text))
    return found
