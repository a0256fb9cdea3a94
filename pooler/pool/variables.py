"""Variables and templates: ``${name}``, ``${row.field}``, and where their values come from.

A string that is exactly one ``${...}`` takes the value itself, keeping its type (a number stays a
number, an object an object); inside a longer string the value is written as text (JSON text for
objects, lists, true/false and null).  ``$${`` is a literal ``${``.  ``${name.a.b}`` and
``${row.a.b}`` go into nested values (a number is a list index).  Templates are filled in strings
at any depth of params and in a step's key; mapping keys are never templates.

``${env.NAME}`` is not allowed: a pool reads the environment only through a declared variable
(``vars: {token: {env: NAME}}``), so every outside input of a pool is named in one place.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pooler.errors import CheckFailed, InputError, Problem, UsageError, did_you_mean
from pooler.pool.documents import parse_text, read_document
from pooler.pool.marks import KEY
from pooler.pool.model import JsonPath, Pool
from pooler.pool.numbers import read_number
from pooler.redact import secret_texts

OPEN = "${"
ESCAPE = "$${"


@dataclass
class Variables:
    """The value of every declared variable, and the secret strings among them (for ``Redactor``)."""

    values: dict[str, Any] = field(default_factory=dict)
    #: The texts the secret variables are masked as (``redact.secret_texts`` of each value).
    secrets: set[str] = field(default_factory=set)
    secret_names: list[str] = field(default_factory=list)
    #: Names the vars file sets that the pool does not declare (one file may serve many pools):
    #: ignored, each with where it stands and a did-you-mean, for ``--verbose``.
    ignored: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Piece:
    """A part of a template string: literal ``text``, or a ``name`` to fill in; ``error`` when the
    ``${`` is never closed."""

    text: str = ""
    name: str | None = None
    error: str | None = None


def scan(text: str) -> list[Piece]:
    """The literal text and the ``${...}`` of a string, in order; ``$${`` is literal ``${``."""
    pieces: list[Piece] = []
    literal: list[str] = []
    i = 0
    while True:
        at = text.find("$", i)
        if at < 0:
            literal.append(text[i:])
            break
        if text.startswith(ESCAPE, at):
            literal.append(text[i:at] + OPEN)
            i = at + len(ESCAPE)
            continue
        if not text.startswith(OPEN, at):
            literal.append(text[i:at + 1])
            i = at + 1
            continue
        literal.append(text[i:at])
        end = text.find("}", at + 2)
        if end < 0:
            pieces.append(Piece(text="".join(literal)))
            literal = []
            pieces.append(Piece(text=text[at:], error=f"{text[at:]!r} opens ${{ but never closes it - "
                                "write ${name}, or $${ for a literal ${."))
            break
        if literal:
            pieces.append(Piece(text="".join(literal)))
            literal = []
        pieces.append(Piece(text=text[at:end + 1], name=text[at + 2:end].strip()))
        i = end + 1
    rest = "".join(literal)
    if rest or not pieces:
        pieces.append(Piece(text=rest))
    return [p for p in pieces if p.text or p.name is not None or p.error]


def placeholders(value: Any) -> Iterator[tuple[JsonPath, str]]:
    """Every ``${...}`` name in ``value`` (strings at any depth), with the path of its string.

    An unclosed ``${`` is yielded as the text from ``${`` on, so a check can tell it apart.
    """
    for path, text in strings(value, ()):
        if OPEN not in text:
            continue
        for piece in scan(text):
            if piece.name is not None:
                yield path, piece.name
            elif piece.error is not None:
                yield path, piece.text


def strings(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, str]]:
    """Every string in a JSON value, with its path (mapping keys are not visited)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings(v, (*path, i))


def substitute(value: Any, scope: Mapping[str, Any]) -> Any:
    """``value`` with every template filled from ``scope`` (variables, and ``row`` when a step runs
    over rows).  Containers are copied only where something changed.  ``InputError`` for a name
    ``scope`` lacks (the checks catch those before a run)."""
    return map_strings(value, lambda text: _fill(text, scope) if "$" in text else text)


@functools.lru_cache(maxsize=4096)
def _pieces(text: str) -> tuple[Piece, ...]:
    # A step over rows fills the same few templates once per row: scan each once.
    return tuple(scan(text))


def _fill(text: str, scope: Mapping[str, Any]) -> Any:
    if OPEN not in text:
        return text
    return fill_pieces(_pieces(text), scope)


def compile_template(text: str) -> tuple[Piece, ...] | None:
    """The pieces of a string that holds a template (scanned once), or None for plain text."""
    return _pieces(text) if OPEN in text else None


def fill_pieces(pieces: tuple[Piece, ...], scope: Mapping[str, Any], decimal: str | None = None) -> Any:
    """A scanned template filled from ``scope``: one whole ``${...}`` keeps its value's type.

    With ``decimal`` (the step's ``for_each.decimal``), a whole ``${row...}`` whose text is wholly
    a number written with that separator is that number; inside longer text it stays as written.
    """
    if len(pieces) == 1 and pieces[0].name is not None:
        found = lookup(pieces[0].name, scope)
        if decimal is not None and isinstance(found, str) and pieces[0].name.startswith("row."):
            number = read_number(found, decimal)
            return found if number is None else number
        return found
    out: list[str] = []
    for piece in pieces:
        if piece.error is not None:
            raise InputError(piece.error)
        if piece.name is None:
            out.append(piece.text)
        else:
            found = lookup(piece.name, scope)
            if isinstance(found, str):
                out.append(found)
            elif type(found) is int:
                out.append(str(found))  # what json.dumps writes, without its cost on every row
            else:
                out.append(json.dumps(found, ensure_ascii=False))
    return "".join(out)


def render_key(template: str, scope: Mapping[str, Any]) -> str:
    """A step's key as it is sent: the template filled, a value that is not text as its JSON."""
    value = _fill(template, scope)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def key_filler(template: str) -> Callable[[Mapping[str, Any]], str]:
    """``render_key`` of one template, made once for every row of a file: a key of text and
    ``${name}`` or ``${name.field}`` whose values are text is filled by a lookup or two a piece;
    any other value, or a name the scope lacks, goes to ``render_key`` itself (same text, same
    refusal)."""
    if OPEN not in template:
        return lambda scope: template
    parts: list[tuple[str | None, str, str | None]] = []
    for piece in _pieces(template):
        if piece.error is not None:
            return functools.partial(render_key, template)
        if piece.name is None:
            parts.append((piece.text, "", None))
            continue
        head, _, rest = piece.name.partition(".")
        if head == "env" or "." in rest:
            return functools.partial(render_key, template)
        parts.append((None, head, rest or None))

    def fill(scope: Mapping[str, Any]) -> str:
        out: list[str] = []
        for text, head, below in parts:
            if text is not None:
                out.append(text)
                continue
            found = scope.get(head)
            if below is not None:
                found = found.get(below) if type(found) is dict else None
            if type(found) is not str:
                return render_key(template, scope)
            out.append(found)
        return "".join(out)

    return fill


def lookup(name: str, scope: Mapping[str, Any]) -> Any:
    """The value ``${name}`` stands for: a variable, or ``row``, and the path below it."""
    head, _, rest = name.partition(".")
    if head == "env":
        raise InputError(env_message(name))
    if head not in scope:
        if head == "row":
            raise InputError(f"${{{name}}}: only a step with for_each has a row - give the step for_each, "
                             "or use a variable.")
        hint = did_you_mean(head, [k for k in scope if k != "row"])
        raise InputError(f"${{{name}}} names no variable{hint or ' - declare it under vars.'}")
    found = scope[head]
    walked = head
    for part in rest.split(".") if rest else ():
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        else:
            fields = f" - its fields: {', '.join(map(str, found))}." if isinstance(found, dict) else "."
            raise InputError(f"${{{name}}}: {walked} has no field [{part}]{fields}")
        walked = f"{walked}.{part}"
    return found


def env_message(name: str) -> str:
    """The refusal of ``${env.NAME}``: say how to read the environment instead."""
    var = name.partition(".")[2] or "NAME"
    low = var.lower() if var.isidentifier() else "name"
    return (f"${{{name}}} reads the environment directly, which a pool may not do - declare a variable "
            f"under vars with env: {var} (vars: {{{low}: {{env: {var}}}}}) and write ${{{low}}}.")


def parse_var(text: str) -> Any:
    """A ``--var`` value read as a YAML scalar: ``3`` is a number, ``abc`` text, ``'3'`` the text 3.
    Anything that is not one scalar (or not YAML) stays the text as given; empty is ``""``."""
    if not text.strip():
        return text
    try:
        value = parse_text(text, "--var", as_json=False).value
    except InputError:
        return text
    return text if isinstance(value, dict | list) else value


def resolve_variables(pool: Pool, overrides: Mapping[str, str], vars_file: Path | None = None,
                      environ: Mapping[str, str] = os.environ) -> Variables:
    """Every variable's value: ``--var`` over ``--vars-file`` over the environment (``env:``) over the
    default.  A variable declared secret, or read from the environment and not declared
    ``secret: false``, is a secret.

    ``UsageError`` for a ``--var`` the pool does not declare; ``CheckFailed`` for variables left with
    no value.  Names in the vars file the pool does not declare are ignored (``Variables.ignored``):
    one ``prod.yaml`` may serve several pools.
    """
    declared = pool.variables
    for name in overrides:
        if name not in declared:
            raise UsageError(_undeclared(pool, name))
    from_file, ignored = _read_vars_file(vars_file, pool) if vars_file is not None else ({}, [])
    result = Variables(ignored=ignored)
    missing: list[Problem] = []
    for name, var in declared.items():
        from_env = False
        if name in overrides:
            value = parse_var(overrides[name])
        elif name in from_file:
            value = from_file[name]
        elif var.env and var.env in environ:
            value, from_env = environ[var.env], True
        elif var.has_default:
            value = var.default
        else:
            missing.append(unset_problem(pool, name, var.env))
            continue
        result.values[name] = value
        if var.secret or (from_env and var.secret is None):
            result.secret_names.append(name)
            result.secrets.update(secret_texts(value))
    if missing:
        raise CheckFailed(missing)
    return result


def _undeclared(pool: Pool, name: str) -> str:
    declared = pool.variables
    if not declared:
        return f"--var {name}: {pool.file} declares no variables - declare {name} under vars."
    hint = did_you_mean(name, declared) or f" - it declares: {', '.join(declared)}."
    return f"--var {name}: {pool.file} declares no variable [{name}]{hint}"


def unset_problem(pool: Pool, name: str, env: str | None) -> Problem:
    """The problem of a declared variable left with no value, at its declaration."""
    ways = f"--var {name}=VALUE" + (f", set the environment variable {env}" if env else "")
    message = f"The variable [{name}] has no value - give it with {ways}, or give it a default under vars."
    if pool.source is None:
        return Problem(message, file=pool.file)
    return pool.source.problem(message, ("vars", name, KEY))


def _read_vars_file(path: Path, pool: Pool) -> tuple[dict[str, Any], list[Problem]]:
    """The file's values of declared variables, and a note for each name the pool does not declare."""
    doc = read_document(path, str(path))
    if not isinstance(doc.value, dict):
        raise InputError(f"{path} holds no mapping of variables - write name: value lines.", file=str(path))
    ignored = [
        doc.source.problem(f"{path} sets [{name}], which {pool.file} does not declare: ignored"
                           f"{did_you_mean(name, pool.variables)}", (name, KEY))
        for name in doc.value if name not in pool.variables
    ]
    values = {k: v for k, v in doc.value.items() if k in pool.variables}
    return values, ignored


def map_strings(value: Any, fill: Callable[[str], Any]) -> Any:
    """``value`` with every string ``s`` (not mapping keys) replaced by ``fill(s)``.

    Containers are copied only where something changed: a value with nothing to fill costs one
    walk and no copies, which matters for thousands of calls with large params.
    """
    if isinstance(value, str):
        return fill(value)
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            new = map_strings(v, fill)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if isinstance(value, list):
        items: list[Any] | None = None
        for i, v in enumerate(value):
            new = map_strings(v, fill)
            if new is not v:
                if items is None:
                    items = list(value)
                items[i] = new
        return value if items is None else items
    return value
