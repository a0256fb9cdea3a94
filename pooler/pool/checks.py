"""The meaning checks of a loaded pool: references, templates and variables, keys, rows, options.

Everything is reported at once, each problem at its spot.  ``check_against`` (the pool against a
store's tool_list) is in ``pooler.pool.against`` and re-exported here.

References: a params string that is wholly ``@name.field`` takes a field of an earlier step's
detail.  By the seed, one that names no earlier step is a word of data and goes as it is; in a pool
file that is nearly always a slip, so the checks report it.  A literal ``@word`` is written
``@@word`` (the executor sends it as ``@word``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from pooler.errors import PoolerError, Problem, closest, did_you_mean, in_order
from pooler.pool.against import check_against
from pooler.pool.comparing import compare_problems
from pooler.pool.marks import KEY
from pooler.pool.model import MODES, RESERVED_NAMES, ForEach, Pool, Step
from pooler.pool.numbers import DECIMALS
from pooler.pool.references import parse_ref
from pooler.pool.refusals import refusal_problem
from pooler.pool.rows import BY_EXTENSION, encoding_problem
from pooler.pool.rules import DOTTED_PATTERN, MAX_CONCURRENCY, into_problem
from pooler.pool.schema_problems import concurrency_message, describe, mode_message, serialize_on_message
from pooler.pool.variables import OPEN, env_message, placeholders, strings, substitute, unset_problem

__all__ = ["NearMiss", "check_against", "check_options", "check_pool", "near_misses"]

_DOTTED = re.compile(DOTTED_PATTERN)
_BARE_REF = re.compile(r"@([^.@\s]+)")


def check_pool(pool: Pool, variables: Mapping[str, Any] | None = None) -> list[Problem]:
    """Every meaning problem of the pool, options included.  With ``variables`` (their resolved
    values), also every declared variable that has none, and keys compared with values filled in."""
    problems = check_options(pool, variables=variables)
    problems.extend(_check_variables(pool, variables))
    named = steps_by_name(pool)
    for step in pool.steps:
        problems.extend(_check_step(pool, step, named))
    return in_order(problems, pool.file)


def check_options(pool: Pool, *, variables: Mapping[str, Any] | None = None) -> list[Problem]:
    """The batch options (also after command-line overrides) and the uniqueness of keys."""
    opts = pool.options
    problems: list[Problem] = []

    def at(name: str, message: str) -> Problem:
        # An option the command line set has no spot in the file to point at.
        if name in pool.options_set and pool.source is not None:
            return pool.source.problem(message, (name,))
        return Problem(message, file=pool.file)

    if opts.mode not in MODES:
        problems.append(at("mode", mode_message(opts.mode)))
    mc = opts.max_concurrency
    if isinstance(mc, bool) or not isinstance(mc, int) or not 1 <= mc <= MAX_CONCURRENCY:
        problems.append(at("max_concurrency", concurrency_message(mc)))
    if opts.serialize_on is not None:
        if not isinstance(opts.serialize_on, str) or not _DOTTED.fullmatch(opts.serialize_on):
            problems.append(at("serialize_on", serialize_on_message(opts.serialize_on)))
        elif opts.mode == "sequential":
            problems.append(at("serialize_on", "serialize_on goes with mode: parallel - with mode: "
                               "sequential it would silently do nothing; set mode: parallel, or remove "
                               "serialize_on."))
    problems.extend(_duplicate_keys(pool, variables))
    return problems


def _duplicate_keys(pool: Pool, variables: Mapping[str, Any] | None) -> Iterator[Problem]:
    """Two steps with one literal key (keys with ${row...} are per row, and told apart at run time)."""
    seen: dict[str, Step] = {}
    for step in pool.steps:
        key = step.key
        if not isinstance(key, str) or _has_row(key):
            continue
        if variables is not None and OPEN in key:
            # An unknown name is reported by the template checks.
            with contextlib.suppress(PoolerError):
                key = str(substitute(key, variables))
        first = seen.setdefault(key, step)
        if first is not step:
            yield step.problem(f"Two steps carry the key [{key}] - steps {first.num} and {step.num}; keys "
                               "must be unique in a pool: a keyed call runs at most once per task.", "key")


def _has_row(text: str) -> bool:
    return any(name == "row" or name.startswith("row.") for _, name in placeholders(text))


def _check_variables(pool: Pool, variables: Mapping[str, Any] | None) -> Iterator[Problem]:
    for name, var in pool.variables.items():
        if name.lower() in RESERVED_NAMES:
            message = (f"The variable name [{name}] is reserved - ${{{name}...}} means something else in a "
                       "template; pick another name.")
            yield pool.source.problem(message, ("vars", name, KEY)) if pool.source else Problem(
                message, file=pool.file)
        elif variables is not None and name not in variables:
            yield unset_problem(pool, name, var.env)


def steps_by_name(pool: Pool) -> dict[str, Step]:
    """Every named step by its name in lower case (the seed does not tell case apart)."""
    named: dict[str, Step] = {}
    for step in pool.steps:
        if step.name:
            named.setdefault(step.name.lower(), step)
    return named


def _earlier_names(pool: Pool, step: Step) -> list[str]:
    return [s.name for s in pool.steps[: step.num - 1] if s.name]


def nearly_named(pool: Pool, step: Step, name: str) -> Step | None:
    """The earlier step whose name ``name`` (of a reference that names no step) nearly is: a slip."""
    near = closest(name, _earlier_names(pool, step))
    return pool.step_named(near) if near is not None else None


@dataclass(frozen=True)
class NearMiss:
    """An ``@name.field`` that names no step but nearly names an earlier one: by the seed a word of
    data (tool_pool sends it as it is), told to the agent beside the answer."""

    step: int
    at: str
    reference: str
    near: Step

    @property
    def message(self) -> str:
        field = self.reference.partition(".")[2]
        return (f"{self.reference} in {self.at} of step {self.step} names no step, so it goes as text - "
                f"did you mean @{self.near.name}.{field} (step {self.near.num})? Write @{self.reference} "
                "to send the text without this note.")

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "at": self.at, "reference": self.reference,
                "nearly_names": {"num": self.near.num, "name": self.near.name}, "message": self.message}


def near_misses(pool: Pool) -> list[NearMiss]:
    """Every reference in the steps' params that names no step but nearly names an earlier one."""
    named = steps_by_name(pool)
    found = []
    for step in pool.steps:
        for path, text in strings(step.params, ("params",)):
            parsed = parse_ref(text) if text.startswith("@") and not text.startswith("@@") else None
            if parsed is None or OPEN in parsed[0] or parsed[0].lower() in named:
                continue
            near = nearly_named(pool, step, parsed[0])
            if near is not None:
                found.append(NearMiss(step.num, ".".join(map(str, path)), text, near))
    return found


def _check_step(pool: Pool, step: Step, named: dict[str, Step]) -> Iterator[Problem]:
    if step.name and step.name.lower() in RESERVED_NAMES:
        yield step.problem(f"The name of step {step.num} is reserved: [{step.name}] - templates use it for "
                           "something else; pick another name.", "name")
    into = into_problem(step.into, in_pool=True) if step.into is not None else None
    if into is not None:
        yield step.problem(into, "into")
    for i, refusal in enumerate(step.retry.refusals if step.retry is not None else ()):
        wrong = refusal_problem(refusal)
        if wrong is not None:
            yield step.problem(f"retry.refusals of step {step.num}: {wrong}", "retry", "refusals", i)
    templates: list[tuple[tuple[str | int, ...], str]] = []
    for path, text in strings(step.params):
        if text.startswith("@") and not text.startswith("@@"):
            found = _check_ref(pool, step, named, text)
            if found is not None:
                yield step.problem(found, "params", *path)
        if OPEN in text:
            templates.extend((("params", *path), name) for _, name in placeholders(text))
    if isinstance(step.key, str) and OPEN in step.key:
        templates.extend((("key",), name) for _, name in placeholders(step.key))
    if step.probe is not None:
        # The probe's params are filled as the step's are: the call's row and the variables.
        for path, text in strings(step.probe.params):
            if OPEN in text:
                templates.extend((("probe", "params", *path), name) for _, name in placeholders(text))
    if step.compare is not None:
        for path, text in strings(step.compare.params):
            if OPEN in text:
                templates.extend((("compare", "params", *path), name) for _, name in placeholders(text))
        yield from compare_problems(step)
    if step.chunk_row is not None:
        # Each row's shape is filled as params are: the row (every one of the chunk) and the variables.
        for path, text in strings(step.chunk_row):
            if OPEN in text:
                templates.extend((("chunk_row", *path), name) for _, name in placeholders(text))
        if step.for_each is None or step.for_each.chunk is None:
            yield step.problem(f"chunk_row of step {step.num} shapes the rows a chunk sends - give the step "
                               "for_each with chunk and field, or fill params instead.", "chunk_row", KEY)
    data_file = step.for_each.file if step.for_each is not None else None
    if isinstance(data_file, str) and OPEN in data_file:
        templates.extend((("for_each", "file"), name) for _, name in placeholders(data_file))
    for where, name in templates:
        message = _template_problem(pool, step, where, name)
        if message is not None:
            # The caret under the ${...} itself, not the start of the string that holds it.
            spot = re.compile(r"\$\{\s*" + re.escape(name) + r"\s*\}") if name and OPEN not in name else None
            yield step.problem(message, *where, within=spot)
    if step.for_each is not None:
        yield from _check_for_each(pool, step, named)


def _check_ref(pool: Pool, step: Step, named: dict[str, Step], text: str) -> str | None:
    """What is wrong with an ``@...`` string, if anything."""
    parsed = parse_ref(text)
    if parsed is None:
        bare = _BARE_REF.fullmatch(text)
        target = named.get(bare.group(1).lower()) if bare else None
        if target is None:
            return None
        return (f"{text} names step {target.num} but no field of its detail - write {text}.id (the field "
                f"you need), or @{text} to send the text {text}.")
    name = parsed[0]
    if OPEN in name:
        return None  # the name comes from a template: known only at run time
    target = named.get(name.lower())
    if target is None:
        near = nearly_named(pool, step, name)
        guess = f" Did you mean @{near.name}.{parsed[1]}?" if near is not None else ""
        return f"{text} names no step - it would be sent as text.{guess} Write @{text} to send a literal @."
    if target.num == step.num:
        return (f"{text} refers to its own step - a step's detail exists only after it ran; refer to an "
                "earlier step.")
    if target.num > step.num:
        return (f"{text} refers to step {target.num}, which comes later - it would be sent as text; move "
                f"step {target.num} before step {step.num}.")
    return None


def _template_problem(pool: Pool, step: Step, where: tuple[str | int, ...], name: str) -> str | None:
    """What is wrong with one ``${name}`` at ``where`` in the step, if anything."""
    head = name.partition(".")[0]
    each = step.for_each
    if head in pool.variables and head.lower() not in RESERVED_NAMES:
        return None
    spot = describe((*step.path, *where))
    if name.startswith(OPEN):
        return f"{spot} opens ${{ but never closes it: {name!r} - write ${{name}}, or $${{ for a literal ${{."
    if not name:
        return f"{spot} holds an empty ${{}} - write ${{name}} with the name of a variable."
    if head == "env":
        return env_message(name)
    if head == "row":
        if where[0] == "for_each":
            return (f"${{{name}}} in {spot}: a data file's name is known before its rows are read - "
                    "use a variable, like feeds/${date}.csv.")
        if each is None:
            return (f"${{{name}}} in {spot}: only a step with for_each has a row - give the step for_each, "
                    "or use a variable.")
        if each.chunk is not None and where[0] == "params":
            return (f"${{{name}}} in {spot}: a step with chunk sends its rows in "
                    f"{each.field or 'its field'}, so there is no single row here - shape each row with "
                    "chunk_row.")
        return None
    if head.lower() in RESERVED_NAMES:
        return f"${{{name}}} in {spot}: [{head}] is a reserved name, not a variable."
    hint = did_you_mean(head, pool.variables)
    return f"${{{name}}} in {spot} names no variable{hint or ' - declare it under vars.'}"


def _check_for_each(pool: Pool, step: Step, named: dict[str, Step]) -> Iterator[Problem]:
    each = step.for_each
    assert each is not None
    n = step.num
    if isinstance(step.key, str) and step.key and not _has_row(step.key):
        yield step.problem(f"The key of step {n} is the same for every row - a step over rows needs "
                           f"${{row...}} in its key, like {step.key}-${{row.id}}.", "key")
    if each.step is not None:
        target = named.get(each.step.lower())
        if target is None:
            hint = did_you_mean(each.step, _earlier_names(pool, step))
            yield step.problem(f"for_each.step of step {n} names no step [{each.step}]{hint or ''}"
                               f"{'' if hint else ' - name an earlier step whose table gives the rows.'}",
                               "for_each", "step")
        elif target.num >= n:
            yield step.problem(f"for_each.step of step {n} names step {target.num} [{each.step}], which does "
                               "not come before it - rows come from the table of an earlier step.",
                               "for_each", "step")
        if each.table is None:
            yield step.problem(f"for_each of step {n} takes rows from step [{each.step}] but names no table "
                               "- add table: with the name of that step's table.", "for_each")
    elif each.table is not None:
        yield step.problem(f"for_each.table of step {n} goes with step, not with file - remove it.",
                           "for_each", "table")
    if each.file is not None and each.format is None and data_format(each) is None:
        yield step.problem(f"for_each of step {n}: the format of {each.file} cannot be told from its name - "
                           "name it .csv, .jsonl or .json, or give format: csv, jsonl or json.",
                           "for_each", "file")
    if each.delimiter is not None and each.delimiter in ("\r", "\n", "\""):
        yield step.problem(f"for_each.delimiter of step {n} is {each.delimiter!r} - give one character "
                           "(not a quote or a line end), like ';' or a tab.", "for_each", "delimiter")
    elif each.delimiter is not None and data_format(each) not in (None, "csv"):
        yield step.problem(f"for_each.delimiter of step {n} goes with a CSV file - {each.file or 'a table'} "
                           "is not one; remove it.", "for_each", "delimiter")
    if each.decimal is not None and each.decimal not in DECIMALS:
        yield step.problem(f"for_each.decimal of step {n} is {each.decimal!r} - give \".\" or \",\", the "
                           "separator the file's numbers are written with.", "for_each", "decimal")
    elif each.decimal is not None and data_format(each) not in (None, "csv"):
        yield step.problem(f"for_each.decimal of step {n} goes with a CSV file - {each.file or 'a table'} "
                           "is not one, and its numbers are numbers already; remove it.",
                           "for_each", "decimal")
    if each.encoding is not None:
        wrong = encoding_problem(each.encoding)
        if wrong is not None:
            yield step.problem(f"for_each.encoding of step {n}: {wrong}", "for_each", "encoding")
    if each.chunk is not None and each.field is None:
        yield step.problem(f"for_each of step {n} has chunk but no field - name the params field that "
                           "receives each chunk's rows, like field: goods.", "for_each", "chunk")
    if each.field is not None and each.chunk is None:
        yield step.problem(f"for_each of step {n} has field but no chunk - give chunk: N, how many rows one "
                           "call sends.", "for_each", "field")
    if each.field is not None and each.chunk is not None and each.field in step.params:
        yield step.problem(f"params.{each.field} of step {n} is filled with each chunk's rows - remove it "
                           "from params.", "params", each.field, KEY)


def data_format(each: ForEach) -> str | None:
    """The format of a step's rows as far as the pool tells it (None: not told)."""
    if each.step is not None:
        return "jsonl"
    if each.format is not None:
        return each.format.lower()
    suffix = PurePath(each.file).suffix.lower() if isinstance(each.file, str) else ""
    return BY_EXTENSION.get(suffix)
