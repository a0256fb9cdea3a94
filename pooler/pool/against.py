"""A pool checked against a store's tool_list: units, commands, grants, fields and their types.

``tools`` is tool_list's ``data.tools`` (contract §1); nothing is sent to the store here.  Values are
cast by the same rules as the reference store (``pooler.fieldtypes``, a PHP store's rules), so a
literal the store would refuse is told before the run; a value made by a template or a reference is
known only at run time and is not cast here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from pooler.contract.fieldtypes import CastError, cast
from pooler.errors import Problem, did_you_mean
from pooler.pool.comparing import compare_field_problems
from pooler.pool.marks import KEY
from pooler.pool.model import Pool, Step
from pooler.pool.references import parse_ref
from pooler.pool.variables import strings

Tool = dict[str, Any]


def check_against(pool: Pool, tools: list[dict[str, Any]]) -> list[Problem]:
    """Every step against the store's declarations; all problems at once."""
    units = {str(t.get("unit", "")).upper(): t for t in tools if isinstance(t, dict)}
    unit_names = [str(t.get("unit", "")) for t in tools if isinstance(t, dict)]
    known: dict[str, Tool] = {}
    named: dict[str, Step] = {}
    for step in pool.steps:
        if step.name:
            named.setdefault(step.name.lower(), step)
    problems: list[Problem] = []
    for step in pool.steps:
        if not step.unit or not step.command:
            continue  # told by the loader: a step needs unit and command (a partial load keeps it)
        command = _check_call(step, units, unit_names, problems)
        if command is None:
            continue
        if step.name:
            known[step.name.lower()] = command
        problems.extend(_check_detail_refs(step, known, named))
        if step.probe is not None:
            problems.extend(_check_probe(step, units, unit_names))
        if step.compare is not None:
            problems.extend(_check_compare(step, command, units, unit_names))
    return problems


def _check_call(step: Step, units: dict[str, Tool], unit_names: list[str],
                problems: list[Problem]) -> Tool | None:
    """The step's unit, command, grant and fields; its command's declaration, if the store has it."""
    tool = units.get(step.unit.upper())
    if tool is None:
        hint = did_you_mean(step.unit, unit_names)
        problems.append(step.problem(f"No tool [{step.unit}] in the store{hint or '.'} `pooler tools` "
                                     "lists the store's tools.", "unit"))
        return None
    unit = str(tool.get("unit"))
    commands = [c for c in tool.get("commands", []) if isinstance(c, dict)]
    command = next((c for c in commands if str(c.get("name", "")).lower() == step.command.lower()), None)
    if command is None:
        names = [str(c.get("name", "")) for c in commands]
        hint = did_you_mean(step.command, names)
        problems.append(step.problem(f"Unknown command [{step.command}] of {unit}{hint or '.'} The tool "
                                     f"has: {', '.join(names)}.", "command"))
        return None
    if command.get("granted") is False:
        problems.append(step.problem(
            f"The command {unit}\\{command.get('name')} is not granted to this token - ask the store's "
            "owner for the grant, or use a token that has it.", "command"))
    problems.extend(_check_fields(step, unit, command))
    return command


def _check_probe(step: Step, units: dict[str, Tool], unit_names: list[str]) -> Iterator[Problem]:
    """A step's probe as a call of its own (unit, command, grant, fields), then ``landed`` and
    ``detail`` as fields of its command's detail, where the declaration tells them."""
    probe = step.probe
    assert probe is not None
    # The probe checked as a step standing where the probe stands: each problem points into it.
    read = replace(step, unit=step.probe_unit, command=probe.command, params=probe.params, for_each=None,
                   path=(*step.path, "probe"))
    problems: list[Problem] = []
    command = _check_call(read, units, unit_names, problems)
    yield from problems
    fields = detail_fields(command) if command is not None else None
    if command is None or fields is None:
        return
    name = f"{units[read.unit.upper()].get('unit')}.{command.get('name')}"
    for key in ("landed", "detail"):
        value = getattr(probe, key)
        if value is not None and value not in fields:
            hint = did_you_mean(value, fields)
            yield read.problem(f"The probe of step {step.num}: {key} [{value}] is not a field of the "
                               f"detail of {name}{hint or '.'} Its detail: "
                               f"{', '.join(sorted(fields)) or 'none'}.", key)


def _check_compare(step: Step, command: Tool, units: dict[str, Tool], unit_names: list[str]
                   ) -> Iterator[Problem]:
    """A step's compare read as a call of its own (unit, command, grant, fields), and the row fields
    it compares as fields the step's chunk rows take, where the declaration names them."""
    compare = step.compare
    assert compare is not None
    read = replace(step, unit=step.compare_unit, command=compare.command, params=compare.params,
                   for_each=None, path=(*step.path, "compare"))
    problems: list[Problem] = []
    _check_call(read, units, unit_names, problems)
    yield from problems
    rows = _row_fields(step, command)
    name = f"{units[step.unit.upper()].get('unit')}.{command.get('name')}"
    yield from compare_field_problems(step, rows, name)


class Declared(NamedTuple):
    """What a step's rows are checked against: its command as the store names it, the types of its
    declared fields, and for a chunked step whose field declares its rows, those row fields."""

    command: str
    types: dict[str, str]
    #: The declared fields of each row the chunk's field takes (None: not declared, or no chunk).
    rows: tuple[dict[str, Any], ...] | None = None


def field_types(pool: Pool, tools: list[dict[str, Any]]) -> dict[int, Declared]:
    """Each step's command as the store names it and the types of its declared fields, by step
    number: what a row's values are checked against (a step the store does not know is left out)."""
    units = {str(t.get("unit", "")).upper(): t for t in tools if isinstance(t, dict)}
    found: dict[int, Declared] = {}
    for step in pool.steps:
        tool = units.get(step.unit.upper())
        commands = [c for c in (tool or {}).get("commands", []) if isinstance(c, dict)]
        command = next((c for c in commands if str(c.get("name", "")).lower() == step.command.lower()), None)
        if tool is None or command is None or command.get("any_fields"):
            continue
        types = {str(p["name"]): str(p.get("type", "")) for p in command.get("params", [])
                 if isinstance(p, dict) and "name" in p and p.get("type") != "files"}
        found[step.num] = Declared(f"{tool.get('unit')}.{command.get('name')}", types,
                                   _row_fields(step, command))
    return found


def _row_fields(step: Step, command: Tool) -> tuple[dict[str, Any], ...] | None:
    """The declared fields of each row of the step's chunk field, where its declaration names them."""
    each = step.for_each
    if each is None or each.chunk is None or each.field is None:
        return None
    param = next((p for p in command.get("params", []) if isinstance(p, dict) and p.get("name") == each.field
                  and p.get("type") == "jsonl"), None)
    rows = param.get("rows") if param is not None else None
    if not isinstance(rows, list):
        return None
    return tuple(r for r in rows if isinstance(r, dict) and isinstance(r.get("name"), str))


def _needed(rows: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("required")]


def _names(fields: list[str]) -> str:
    shown = [f"[{f}]" for f in fields]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def unshaped_rows(step: Step, declared: Declared, path: Path, header: tuple[str, ...]) -> Problem | None:
    """A chunked step without chunk_row whose file's rows lack fields each row of the command's
    field requires: the rows go as the file holds them, so every chunk would be refused."""
    each = step.for_each
    if declared.rows is None or step.chunk_row is not None or each is None:
        return None
    missing = [str(r["name"]) for r in _needed(declared.rows) if r["name"] not in header]
    if not missing:
        return None
    carry = "neither" if len(missing) == 2 else ("none of them" if len(missing) > 2 else "it not")
    like = f"chunk_row: {{{missing[0]}: \"${{row.{header[0]}}}\"}}" if header else "chunk_row"
    return step.problem(
        f"each row of the field [{each.field}] of {declared.command} needs {_names(missing)}, and the rows "
        f"of {path} carry {carry} (its fields: {', '.join(header)}) - shape each row with chunk_row, like "
        f"{like}.", "for_each", KEY)


def _check_fields(step: Step, unit: str, command: Tool) -> Iterator[Problem]:
    name = str(command.get("name", ""))
    declared = {str(p["name"]): p for p in command.get("params", []) if isinstance(p, dict) and "name" in p}
    each = step.for_each
    chunk_field = each.field if each is not None and each.chunk is not None else None
    if any(p.get("type") == "files" and p.get("required") for p in declared.values()):
        yield step.problem(f"The command [{name}] of {unit} carries files, which a pool step cannot - run it "
                           f"with `pooler call {unit} {name} --files-source FILE`.", "command")
    if command.get("any_fields"):
        return
    given = {k: v for k, v in step.params.items() if v is not None}
    fields = list(declared)
    for key in given:
        if key not in declared:
            yield step.problem(_too_many(name, key, fields), "params", key, KEY)
    if chunk_field is not None:
        if chunk_field not in declared:
            yield step.problem(_too_many(name, chunk_field, fields), "for_each", "field")
        elif declared[chunk_field].get("type") != "jsonl":
            kind = declared[chunk_field].get("type")
            yield step.problem(f"for_each.field [{chunk_field}] of step {step.num} must be a jsonl field of "
                               f"the command [{name}], not {kind} - the chunk's rows go there as a list.",
                               "for_each", "field")
        else:
            rows = declared[chunk_field].get("rows")
            yield from _check_chunk_row(step, f"{unit}.{name}", chunk_field, rows)
    for field, param in declared.items():
        if param.get("required") and param.get("type") != "files" and field not in given \
                and field != chunk_field:
            yield step.problem(f"The command [{name}] needs the field [{field}] ({param.get('type')}): it is "
                               "required - add it to params.", "params")
    for key, value in given.items():
        spec = declared.get(key)
        if spec is None:
            continue
        kind = str(spec.get("type", ""))
        if kind == "files":
            yield step.problem(f"The field [{key}] of the command [{name}] takes files: a pool step cannot "
                               f"carry them - run it with `pooler call {unit} {name} --files-source FILE`.",
                               "params", key)
            continue
        if _made_at_run_time(value) or (kind == "jsonl" and _rows_file(value)):
            continue
        try:
            cast(kind, value)
        except CastError as exc:
            yield step.problem(f"The field [{key}] of the command [{name}] takes {kind}: {exc}.",
                               "params", key)


def _check_chunk_row(step: Step, command: str, field: str, rows: Any) -> Iterator[Problem]:
    """The step's chunk_row against the declared fields of each row of its chunk field: every
    required one given, and a value that is no template cast by its type."""
    if step.chunk_row is None or not isinstance(rows, list):
        return
    declared = {str(r["name"]): r for r in rows if isinstance(r, dict) and isinstance(r.get("name"), str)}
    for row_field, spec in declared.items():
        if spec.get("required") and step.chunk_row.get(row_field) is None:
            yield step.problem(f"chunk_row of step {step.num} gives no [{row_field}] - each row of the field "
                               f"[{field}] of {command} needs it ({spec.get('type')}).", "chunk_row", KEY)
    for key, value in step.chunk_row.items():
        found = declared.get(key)
        if found is None or value is None or _made_at_run_time(value):
            continue
        try:
            cast(str(found.get("type", "")), value)
        except CastError as exc:
            yield step.problem(f"The field [{key}] of each row of [{field}] of {command} takes "
                               f"{found.get('type')}: {exc}.", "chunk_row", key)


def _too_many(command: str, key: str, fields: list[str]) -> str:
    if not fields:
        return f"The command [{command}] takes no fields, and [{key}] is given - remove it."
    hint = did_you_mean(key, fields)
    return f"The command [{command}] has no field [{key}]{hint or '.'} Its fields: {', '.join(fields)}."


def _made_at_run_time(value: Any) -> bool:
    """A template or a reference somewhere in the value: its final form is known only at run time."""
    if isinstance(value, str):
        return "${" in value or (value.startswith("@") and parse_ref(value) is not None)
    if isinstance(value, dict):
        return any(_made_at_run_time(v) for v in value.values())
    if isinstance(value, list):
        return any(_made_at_run_time(v) for v in value)
    return False


def _rows_file(value: Any) -> bool:
    """``{"file": "rows.jsonl"}``: a jsonl field the caller reads from a file."""
    return isinstance(value, dict) and set(value) == {"file"}


def detail_fields(command: Tool) -> set[str] | None:
    """The detail fields a command declares, when its declaration tells them (a list or an object)."""
    detail = command.get("detail")
    if isinstance(detail, dict):
        return {str(k) for k in detail}
    if isinstance(detail, list):
        return {str(d.get("name") if isinstance(d, dict) else d) for d in detail}
    return None


def _check_detail_refs(step: Step, known: dict[str, Tool], named: dict[str, Step]) -> Iterator[Problem]:
    for path, text in strings(step.params, ()):
        parsed = parse_ref(text) if text.startswith("@") else None
        if parsed is None:
            continue
        target = named.get(parsed[0].lower())
        command = known.get(parsed[0].lower())
        if target is None or target.num >= step.num or command is None:
            continue
        fields = detail_fields(command)
        head = parsed[1].split(".", 1)[0]
        if fields is not None and head not in fields:
            hint = did_you_mean(head, fields)
            yield step.problem(f"@{parsed[0]}.{head} names a field the detail of that step does not have"
                               f"{hint or '.'} Its detail: {', '.join(sorted(fields)) or 'none'}.",
                               "params", *path)


