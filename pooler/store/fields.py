"""The fields of a call checked against the command's declaration: too many, missing, wrong type."""

from __future__ import annotations

from typing import Any

from pooler.contract.declarations import Command
from pooler.contract.fieldtypes import CastError, cast
from pooler.errors import did_you_mean


class FieldError(ValueError):
    """The fields do not fit the declaration; the text is the refusal's message."""


def _names(names: list[str]) -> str:
    return ", ".join(f"[{n}]" for n in names)


def check_fields(command: Command, params: dict[str, Any]) -> dict[str, Any]:
    """The fields as the module gets them: cast, defaults filled, nulls left out.

    The ``files`` field is not among them: the engine fills it with the attachments' rows.
    Raises ``FieldError``.
    """
    given = {k: v for k, v in params.items() if v is not None}
    if command.any_fields:
        return given
    declared = {p.name: p for p in command.params}
    extra = [k for k in given if k not in declared]
    if extra:
        raise FieldError(_too_many(command, extra))
    missing = [p for p in command.params if p.required and p.type != "files" and p.name not in given]
    if len(missing) == 1:
        p = missing[0]
        raise FieldError(f"The command [{command.name}] needs the field [{p.name}] ({p.type}): "
                         "it is required.")
    if missing:
        names = _names([p.name for p in missing])
        raise FieldError(f"The command [{command.name}] needs the fields {names}: they are required.")
    fields: dict[str, Any] = {}
    for name, value in given.items():
        param = declared[name]
        if param.type == "files":
            raise FieldError(f"The field [{name}] of the command [{command.name}] takes files: send them "
                             "as attachments of the call, not in params.")
        try:
            fields[name] = cast(param.type, value)
        except CastError as exc:
            raise FieldError(f"The field [{name}] of the command [{command.name}] takes {param.type}: "
                             f"{exc}.") from None
    for param in command.params:
        if param.name not in fields and param.default and param.type != "files":
            fields[param.name] = param.default_value()
    return fields


def _too_many(command: Command, extra: list[str]) -> str:
    names = [p.name for p in command.params]
    if not names:
        return (f"The command [{command.name}] takes no fields, and {_names(extra)} came - "
                "send it without params.")
    if len(extra) == 1:
        hint = did_you_mean(extra[0], names)
        head = f"The command [{command.name}] has no field [{extra[0]}]"
        head += f"{hint}" if hint else "."
    else:
        head = f"The command [{command.name}] has no fields {_names(extra)}."
    return f"{head} Its fields: {', '.join(names)}."
