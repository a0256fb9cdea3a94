"""Tool declarations: the JSON a Melbis store exports for each AI tool (contract section 1), read
and checked.

A declaration names its module file (``melbis_agent_brand.php``) and, in a tool_list, its address
(the file's name upper-cased without ``.php``), and lists the commands with their fields and types.
The reference store serves tools declared this way, and ``pooler check --against`` reads a shop's
exported declarations the same way, without a store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pooler.contract.fieldtypes import TYPES, CastError, cast
from pooler.errors import InputError

_MODULE = re.compile(r"[a-z][a-z0-9_]*\.php")
_COMMAND = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    required: bool = False
    #: As the store keeps it: always a string, "" for no default.
    default: str = ""
    descr: str = ""
    #: A ``jsonl`` field's row fields, where its declaration names them (each row's fields, typed
    #: and required like a command's); None: what a row holds is not declared.
    rows: tuple[Param, ...] | None = None

    def default_value(self) -> Any:
        return cast(self.type, self.default)

    def declared(self) -> dict[str, Any]:
        found = {"name": self.name, "type": self.type, "required": self.required,
                 "default": self.default, "descr": self.descr}
        if self.rows is not None:
            found["rows"] = [r.declared() for r in self.rows]
        return found


@dataclass(frozen=True)
class Command:
    name: str
    descr: str
    params: tuple[Param, ...]
    #: The command takes any fields as they come (no field is checked or cast).
    any_fields: bool = False
    #: The fields of the command's detail, where its declaration names them (references and
    #: probes are checked by them).
    detail: tuple[str, ...] | None = None

    def files_param(self) -> Param | None:
        return next((p for p in self.params if p.type == "files"), None)


@dataclass(frozen=True)
class Tool:
    unit: str
    module: str
    name: str
    descr: str
    commands: tuple[Command, ...]
    source: Path

    def command(self, name: str) -> Command | None:
        """The command whatever the case of its name."""
        wanted = name.lower()
        return next((c for c in self.commands if c.name.lower() == wanted), None)

    def listed(self, granted: Callable[[str], bool] | None = None) -> dict[str, Any]:
        """The tool as tool_list lists it; without ``granted`` the grants are not known and not said."""
        commands = []
        for c in self.commands:
            item: dict[str, Any] = {"name": c.name, "descr": c.descr}
            if granted is not None:
                item["granted"] = granted(c.name)
            item["params"] = [p.declared() for p in c.params]
            if c.any_fields:
                item["any_fields"] = True
            if c.detail is not None:
                item["detail"] = list(c.detail)
            commands.append(item)
        return {"unit": self.unit, "module": self.module, "name": self.name, "descr": self.descr,
                "commands": commands}

    @property
    def module_stem(self) -> str:
        return self.module[: -len(".php")]


def unit_of(module: str) -> str:
    return module[: -len(".php")].upper()


def load_folder(folder: Path) -> list[Tool]:
    """Every ``*.json`` declaration of a folder, each unit once; raises ``InputError``."""
    found: dict[str, Tool] = {}
    for path in sorted(folder.glob("*.json")):
        tool = load_declaration(path)
        if tool.unit in found:
            raise InputError(f"the unit {tool.unit} is declared twice: in {found[tool.unit].source.name} "
                             f"and in {path.name} - keep one", file=str(path))
        found[tool.unit] = tool
    return list(found.values())


def load_declaration(path: Path) -> Tool:
    """One tool from its JSON declaration; raises ``InputError`` naming what is wrong and where."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path} is not utf-8 text - save it in utf-8", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON: {exc.msg}", file=str(path), line=exc.lineno,
                         column=exc.colno) from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", file=str(path)) from None
    return tool_of(doc, path)


def _need(cond: bool, path: Path, where: str, what: str) -> None:
    if not cond:
        raise InputError(f"{where} {what}", file=str(path), path=where)


def tool_of(doc: Any, path: Path) -> Tool:
    """One tool from a declaration already read (either form); raises ``InputError``."""
    _need(isinstance(doc, dict), path, "the declaration", "must be a JSON object with unit and commands")
    module, unit = _module_and_unit(doc, path)
    for key in ("name", "descr"):
        _need(isinstance(doc.get(key, ""), str), path, key, "must be text")
    commands = doc.get("commands")
    _need(isinstance(commands, list) and bool(commands), path, "commands", "must be a non-empty list")
    built: list[Command] = []
    for i, raw in enumerate(commands):
        command = _command(raw, path, f"commands[{i}]")
        _need(all(c.name.lower() != command.name.lower() for c in built), path, f"commands[{i}].name",
              f"{command.name} is declared twice")
        built.append(command)
    return Tool(unit, module, doc.get("name", ""), doc.get("descr", ""), tuple(built), path)


#: The two forms a declaration may take, shown whenever one is refused.
FORMS = ('a shop\'s export names the module file in unit: {"unit": "melbis_agent_brand.php", '
         '"commands": [...]}; a tool_list names the address and the file: {"unit": "MELBIS_AGENT_BRAND", '
         '"module": "melbis_agent_brand.php", "commands": [...]}')


def _module_and_unit(doc: dict[str, Any], path: Path) -> tuple[str, str]:
    """The module file and the address, from either form of a declaration (contract section 1)."""
    given_unit, module = doc.get("unit"), doc.get("module")
    if module is None:
        # A shop's own export: unit is the module file's name and there is no address.
        _need(isinstance(given_unit, str) and bool(_MODULE.fullmatch(given_unit)), path,
              "unit",
              ("is missing" if given_unit is None else
               f"is {json.dumps(given_unit)} and module is missing") + f" - {FORMS}")
        assert isinstance(given_unit, str)
        return given_unit, unit_of(given_unit)
    _need(isinstance(module, str) and bool(_MODULE.fullmatch(module)), path, "module",
          f"is {json.dumps(module)}, not a module file's name like \"melbis_agent_brand.php\" - {FORMS}")
    assert isinstance(module, str)
    unit = unit_of(module)
    if given_unit is not None:
        _need(given_unit == unit, path, "unit",
              f"is {json.dumps(given_unit)}, but the address of {module} is {unit} (its name upper-cased, "
              f"no .php) - {FORMS}")
    return module, unit


def _command(raw: Any, path: Path, where: str) -> Command:
    _need(isinstance(raw, dict), path, where, "must be an object with name, descr and params")
    name = raw.get("name")
    _need(isinstance(name, str) and bool(_COMMAND.fullmatch(name)), path, f"{where}.name",
          "must be the command's function name, like CmdAdd")
    _need(isinstance(raw.get("descr", ""), str), path, f"{where}.descr", "must be text")
    _need(isinstance(raw.get("any_fields", False), bool), path, f"{where}.any_fields",
          "must be true or false")
    params_raw = raw.get("params", [])
    _need(isinstance(params_raw, list), path, f"{where}.params", "must be a list")
    params: list[Param] = []
    for j, p in enumerate(params_raw):
        param = _param(p, path, f"{where}.params[{j}]")
        _need(all(q.name != param.name for q in params), path, f"{where}.params[{j}].name",
              f"{param.name} is declared twice")
        params.append(param)
    _need(sum(p.type == "files" for p in params) <= 1, path, f"{where}.params", "may hold one files field")
    detail = raw.get("detail")
    _need(detail is None or (isinstance(detail, list) and all(isinstance(d, str) for d in detail)), path,
          f"{where}.detail", "must be a list of the names of the detail's fields")
    return Command(name, raw.get("descr", ""), tuple(params), raw.get("any_fields", False),
                   tuple(detail) if detail is not None else None)


def _param(raw: Any, path: Path, where: str) -> Param:
    _need(isinstance(raw, dict), path, where, "must be an object with name, type, required, default, descr")
    name, type_ = raw.get("name"), raw.get("type")
    _need(isinstance(name, str) and bool(name), path, f"{where}.name", "must be a non-empty text")
    _need(type_ in TYPES, path, f"{where}.type", f"must be one of {', '.join(sorted(TYPES))}")
    _need(isinstance(raw.get("required", False), bool), path, f"{where}.required", "must be true or false")
    default = raw.get("default", "")
    _need(isinstance(default, str), path, f"{where}.default", 'must be a string, as the store keeps it ("1")')
    _need(isinstance(raw.get("descr", ""), str), path, f"{where}.descr", "must be text")
    rows_raw = raw.get("rows")
    _need(rows_raw is None or (type_ == "jsonl" and isinstance(rows_raw, list)), path, f"{where}.rows",
          "goes with a jsonl field: the list of the fields each of its rows holds")
    rows = tuple(_param(r, path, f"{where}.rows[{k}]") for k, r in enumerate(rows_raw or ()))
    _need(all(r.type not in ("files", "jsonl") for r in rows), path, f"{where}.rows",
          "hold fields of values: no files or jsonl in a row")
    param = Param(name, type_, raw.get("required", False), default, raw.get("descr", ""),
                  rows if rows_raw is not None else None)
    if default and type_ != "files":
        try:
            param.default_value()
        except CastError as exc:
            raise InputError(f"{where}.default: {exc}", file=str(path),
                             path=f"{where}.default") from None
    return param
