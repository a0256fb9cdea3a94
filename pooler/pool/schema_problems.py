"""The pool file's JSON Schema, applied with positions and told in words a person reads.

The schema (schemas/pool.schema.json, published for editors) is loaded once and its validator
compiled once.  Its errors become ``Problem``s at the spot they are about; where one of the seed's
refusals (applied by the loader) or a meaning check (``pooler.pool.checks``) already speaks of that spot
with the seed's text, the schema stays silent, so nothing is told twice.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pooler.errors import Problem, did_you_mean
from pooler.pool.budget import allowance_message
from pooler.pool.marks import KEY
from pooler.pool.model import JsonPath, Source, format_path
from pooler.pool.schema_gate import Check, compile_schema

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

Part = Literal["pool", "steps"]

_KINDS = {
    "object": "an object", "array": "a list", "string": "a string", "integer": "a whole number",
    "number": "a number", "boolean": "true or false", "null": "null",
}


@functools.cache
def pool_schema() -> dict[str, Any]:
    """The pool file's schema: the wheel's copy when installed, else the repository's."""
    # Beside the package, as the journal's SQL is read: importlib.resources would load zipfile,
    # tempfile and shutil for a file that is never in a zip.
    packaged = Path(__file__).resolve().parents[1] / "data" / "pool.schema.json"
    if packaged.is_file():
        text = packaged.read_text(encoding="utf-8")
    else:
        repo = Path(__file__).resolve().parents[2]
        text = (repo / "schemas" / "pool.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _schema_of(part: Part) -> dict[str, Any]:
    schema = pool_schema()
    if part == "steps":
        return {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/steps"}
    return schema


@functools.cache
def validator(part: Part = "pool") -> Draft202012Validator:
    """The compiled validator of a whole pool file, or of a list of steps (a pool_source file)."""
    # Imported here: a valid pool passes the compiled pre-check and never needs jsonschema, whose
    # import is a quarter of start-up; only a broken one needs its wording.
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    return Draft202012Validator(_schema_of(part))


@functools.cache
def _quick(part: Part) -> Check | None:
    return compile_schema(_schema_of(part))


def schema_problems(doc: Any, source: Source, part: Part = "pool") -> list[Problem]:
    """Every schema error of ``doc`` as a problem at its spot, seed-covered spots left out."""
    quick = _quick(part)
    if quick is not None and quick(doc):
        return []
    problems: list[Problem] = []
    for error in validator(part).iter_errors(doc):
        problems.extend(_problems_of(error, source))
    return problems


def kind_of(value: Any) -> str:
    """How a value reads after "not": ``an object``, ``a list``, ``the text "4"``, ``2.5``..."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the text {json.dumps(shown, ensure_ascii=False)}"
    return json.dumps(value)


def describe(path: JsonPath) -> str:
    """How a spot of a pool file reads in a message: ``params of step 2``, ``env of variable x``."""
    step_at = _step_index(path)
    if step_at is not None:
        index, rest = step_at
        where = f"step {index + 1}"
        return f"{format_path(rest)} of {where}" if rest else where
    if len(path) >= 2 and path[0] == "vars":
        where = f"variable {path[1]}"
        return f"{format_path(path[2:])} of {where}" if len(path) > 2 else where
    return format_path(path) or "the pool file"


def _step_index(path: JsonPath) -> tuple[int, JsonPath] | None:
    if len(path) >= 2 and path[0] == "pool" and isinstance(path[1], int):
        return path[1], path[2:]
    if path and isinstance(path[0], int):
        return path[0], path[1:]
    return None


def _problems_of(error: ValidationError, source: Source) -> Iterable[Problem]:
    path: JsonPath = tuple(error.absolute_path)
    step = _step_index(path)
    num = step[0] + 1 if step else None
    rest = step[1] if step else path
    kind = error.validator
    if _seed_covers(error, path, rest, step is not None):
        return []
    if kind == "additionalProperties":
        return _unknown_keys(error, path, source, num)
    if kind == "pattern" and "propertyNames" in error.relative_schema_path:
        name = str(error.instance)
        return [source.problem(f"The variable name [{name}] is not a name - use letters, digits and _, "
                               "not starting with a digit.", (*path, name, KEY))]
    return [source.problem(_message(error, path, rest), path, step=num)]


def _seed_covers(error: ValidationError, path: JsonPath, rest: JsonPath, in_step: bool) -> bool:
    """The spots the seed's refusals (or a meaning check) tell about in their own words."""
    kind = error.validator
    if kind in ("not", "anyOf", "dependentRequired") and path != ("breaker",):
        # The rules the schema states for editors (reserved names, ${env.X}, params with
        # params_source, serialize_on without parallel, chunk without field): the loader and the
        # meaning checks tell each in their own words.
        return True
    if not path and kind in ("oneOf", "required"):
        return True  # pool is required / pool or pool_source, not both
    if path in ((), ("pool",)) and kind == "minItems":
        return True  # pool is required
    if not in_step:
        return False
    if not rest:
        # Step N is not an object / needs unit and command (carries files is told per key).
        return kind in ("type", "required")
    field = rest[0]
    if len(rest) == 1 and field in ("unit", "command") and kind == "minLength":
        return True  # an empty unit or command is no unit or command: Step N needs unit and command
    if rest == ("name",) and kind == "pattern":
        return True  # The name of step N carries a dot
    return rest == ("into",) and kind in ("pattern", "maxLength")  # into is the bare name of a job (checks)


def _unknown_keys(error: ValidationError, path: JsonPath, source: Source, num: int | None) -> list[Problem]:
    allowed = list(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
    instance = error.instance if isinstance(error.instance, dict) else {}
    in_step = num is not None and len(path) == (1 if path and isinstance(path[0], int) else 2)
    where = describe(path)
    if not path:
        where = "the pool file's top level"
    out = []
    for key in instance:
        if key in allowed or (in_step and key in ("files", "files_source")):
            continue
        hint = did_you_mean(key, allowed)
        if not path and key in _STEP_KEYS:
            hint = f" - {key} belongs to a step: put the step in the list under pool."
        elif not hint:
            hint = f" - {where} takes: {', '.join(k for k in allowed if k != '$schema')}."
        out.append(source.problem(f"Unknown key [{key}] in {where}{hint}", (*path, key, KEY), step=num))
    return out


_STEP_KEYS = ("unit", "command", "params", "params_source", "name")


def _message(error: ValidationError, path: JsonPath, rest: JsonPath) -> str:
    kind = error.validator
    what = describe(path)
    value = error.instance
    if path == ("breaker",) and kind == "not":
        return f"{what} is on by default - write {{after: 5, wait: 60}} to set it, or false to turn it off."
    if path == ("breaker",) and kind == "type":
        return f"{what} must be {{after, wait}} or false, not {kind_of(value)}."
    if path == ("mode",) and kind == "enum":
        return mode_message(value)
    if path == ("max_concurrency",) and kind in ("minimum", "maximum"):
        return concurrency_message(value)
    if path == ("serialize_on",) and kind == "pattern":
        return serialize_on_message(value)
    if kind == "type" and len(path) == 2 and path[0] == "vars":
        return (f"{what} must be a value (text, a number, true/false or null) or a declaration "
                f"{{default, description, env, secret}}, not {kind_of(value)} - put a list or an object "
                "under default.")
    if kind == "type":
        wanted = error.validator_value
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        if "number" in names and "integer" in names:
            names.remove("integer")
        if "null" in names and len(names) > 1:
            names.remove("null")  # allowed as "nothing", never the thing to write instead
        expected = " or ".join(_KINDS.get(n, n) for n in names)
        return f"{what} must be {expected}, not {kind_of(value)}."
    if kind == "enum":
        choices = [str(c) for c in error.validator_value]
        hint = did_you_mean(str(value), choices) if isinstance(value, str) else ""
        # A choice that is not a word (the decimal ".") is quoted, or the list reads as punctuation.
        shown = [c if c.isidentifier() else json.dumps(c) for c in choices]
        return f"{what} must be one of {', '.join(shown)}, not {kind_of(value)}{hint or '.'}"
    if kind == "minimum":
        return f"{what} must be at least {error.validator_value}, not {kind_of(value)}."
    if kind == "maximum":
        return f"{what} must be at most {error.validator_value}, not {kind_of(value)}."
    if kind == "minLength":
        return f"{what} must not be empty."
    if kind == "minItems":
        return f"{what} must not be empty."
    if kind == "pattern" and rest[-1:] == ("env",):
        return (f"{what} must be the name of an environment variable (letters, digits and _), "
                f"not {kind_of(value)}.")
    if rest[:1] == ("rate",) and kind == "required":
        return f"{what} needs per_second - how many calls a second may start, like {{per_second: 20}}."
    if rest == ("rate", "key") and kind == "pattern":
        return f"{what} [{value}] is not a dotted path into params - write it like warehouse or order.ref."
    if kind == "oneOf" and len(rest) == 2 and rest[0] == "tolerate":
        return allowance_message(what, value, kind_of(value))
    if kind == "required" and rest == ("probe",):
        missing = [k for k in ("command", "landed") if not isinstance(value, dict) or k not in value]
        return (f"{what} needs command and landed - {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} missing; landed names the field of the probe's "
                "detail that is true when the call landed, like landed: found.")
    if kind == "oneOf" and rest[-1:] == ("for_each",):
        return _for_each_message(what, value)
    return f"{what}: {error.message}"


def _for_each_message(what: str, value: Any) -> str:
    if isinstance(value, dict) and "file" in value and "step" in value:
        return (f"{what} names both file and step - keep one: rows come from a data file or from "
                "a step's table.")
    return f"{what} needs file (a data file of rows) or step (an earlier step whose table gives the rows)."


def hinted(head: str, hint: str, fix: str) -> str:
    """``head - fix``, or with a did-you-mean ``head - did you mean x? Fix``."""
    if hint:
        return f"{head}{hint} {fix[:1].upper()}{fix[1:]}"
    return f"{head} - {fix}"


def mode_message(value: Any) -> str:
    """The refusal of an unknown mode (in the file or on the command line)."""
    hint = did_you_mean(value, ("sequential", "parallel")) if isinstance(value, str) else ""
    shown = value if isinstance(value, str) else kind_of(value)
    return hinted(f"Unknown mode [{shown}]", hint, "the mode is sequential or parallel.")


def concurrency_message(value: Any) -> str:
    """The refusal of a max_concurrency out of 1..16."""
    return f"max_concurrency must be 1 to 16, not {kind_of(value)} - a pool sends at most 16 calls at once."


def serialize_on_message(value: Any) -> str:
    """The refusal of a serialize_on that is no dotted path."""
    return f"serialize_on [{value}] is not a dotted path into params - write it like contract or order.ref."

