"""What the editor offers at the cursor: keys with their descriptions, the registry's units and
commands, a command's fields, earlier steps and their detail, a data file's columns, variables."""

from __future__ import annotations

from dataclasses import dataclass

from pooler.lsp.context import Spot
from pooler.lsp.keys import keys_at
from pooler.lsp.registry import Declarations, field_text
from pooler.lsp.steps import data_file, earlier, step_at
from pooler.pool.model import Pool, Step


@dataclass(frozen=True)
class Item:
    """One completion: its label, a one-line detail, its documentation, and what it is."""

    label: str
    detail: str = ""
    doc: str = ""
    kind: str = "key"


def complete(spot: Spot, pool: Pool | None, decl: Declarations, line: int) -> list[Item]:
    step = step_at(pool, line, spot.path)
    if spot.kind == "key":
        return _keys(spot.path, step, decl)
    if spot.kind == "value":
        return _values(spot, step, decl)
    if spot.kind == "ref":
        return [Item(s.name, f"step {s.num}: {s.unit}.{s.command}", s.description, "step")
                for s in earlier(pool, step)]
    if spot.kind == "ref_field":
        target = pool.step_named(spot.ref) if pool is not None else None
        if target is None:
            return []
        return [Item(name, f"detail of {target.unit}.{target.command}", kind="field")
                for name in decl.detail(target.unit, target.command)]
    if spot.kind == "row":
        data = data_file(pool, step)
        return [Item(name, f"column of {data.path.name}", kind="column")
                for name in (data.fields or ())] if data is not None else []
    if spot.kind == "var" and pool is not None:
        found = [Item(v.name, "variable", v.description, "var") for v in pool.variables.values()]
        if step is not None and step.for_each is not None:
            found.append(Item("row", "the row this call is made for", kind="var"))
        return found
    return []


def _keys(path: tuple[str | int, ...], step: Step | None, decl: Declarations) -> list[Item]:
    if path[-1:] == ("params",) and step is not None:
        unit, command = step.unit, step.command
        if path[-2:-1] == ("probe",) and step.probe is not None:
            unit, command = step.probe_unit, step.probe.command
        return [_field(p) for p in decl.fields(unit, command)]
    return [Item(name, "", text) for name, text in keys_at(path).items()]


def _field(param: dict[str, object]) -> Item:
    need = "required" if param.get("required") else "optional"
    return Item(str(param["name"]), f"{param.get('type', '?')}, {need}", field_text(param), "field")


def _values(spot: Spot, step: Step | None, decl: Declarations) -> list[Item]:
    if spot.key == "unit":
        return [Item(str(t.get("unit")), str(t.get("name", "")), str(t.get("descr", "")), "unit")
                for t in decl.list]
    if spot.key == "command":
        unit = step.unit if step is not None else ""
        if spot.path[-1:] == ("probe",) and step is not None:
            unit = step.probe_unit
        return [Item(str(c.get("name")), "" if c.get("granted", True) else "not granted to this token",
                     str(c.get("descr", "")), "command") for c in decl.commands(unit)]
    if spot.key == "mode":
        return [Item("sequential", kind="value"), Item("parallel", kind="value")]
    return []
