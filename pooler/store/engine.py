"""The store's engine: finds the tool and the command, checks grants and fields, lays out the
attachments, runs the module and wraps its answer. It knows nothing of HTTP: it takes a token, the
request's JSON and its file parts, and gives back an ``Answer`` (status, content type, bytes).
"""

from __future__ import annotations

import importlib
import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from pooler.contract.declarations import Command, Tool
from pooler.contract.fieldtypes import CastError, cast
from pooler.store import answers as env
from pooler.store.ctx import Command as CommandFunc
from pooler.store.ctx import Ctx, Sql, is_recorded
from pooler.store.db import Database, transaction
from pooler.store.fields import FieldError, check_fields
from pooler.store.files import AttachmentError, Attachments, Part, check_entries
from pooler.store.idempotency import Claim, Idempotency, Stored
from pooler.store.registry import Registry, load_registry

TOOLS_PACKAGE = "pooler.store.tools"
#: What a read token is granted, in every tool.  Not CmdOps: it shows every caller's params.
READ_COMMANDS = frozenset({"cmdlist", "cmdget", "cmdecho"})


@dataclass(frozen=True)
class StoreConfig:
    db: Path
    root: Path
    tokens: tuple[str, ...] = ()
    read_tokens: tuple[str, ...] = ()
    registry_dirs: tuple[Path, ...] = ()
    latency_ms: int = 0
    #: How long MELBIS_AGENT_ORDER.CmdAdd books (its contract locked meanwhile).
    order_ms: int = 100
    max_file_kb: int | None = None
    idempotency: bool = True
    #: How long a call's answer waits once the call is carried out (and recorded).
    reply_delay_ms: int = 0


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes
    #: A command ran for this answer (it wrote its row to ``ops``).
    ran: bool = False


@dataclass
class _Call:
    """What one call of tool_run has found out so far."""

    token: str
    started: float
    key: str | None
    #: The W3C ``traceparent`` the call arrived with, when it is one.
    traceparent: str | None = None
    debug: bool = False
    unit_ms: int | None = None
    sql: tuple[int, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The hold on the call's Idempotency-Key, and whether its answer is kept already.
    claim: Claim | None = None
    kept: bool = False
    #: Whether it was carried out and recorded in ``ops`` (what ``reply_delay_ms`` holds back).
    recorded: bool = False


class Engine:
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.registry: Registry = load_registry(config.registry_dirs)
        self.db = Database(config.db, tuple(_schemas(self.registry)))
        config.root.mkdir(parents=True, exist_ok=True)
        self.attachments = Attachments(config.root, config.max_file_kb)
        self.idempotency = Idempotency(self.db)
        self._full = frozenset(config.tokens)
        self._read = frozenset(config.read_tokens) - self._full

    def close(self) -> None:
        self.db.close()

    # -- grants ------------------------------------------------------------------------------

    def knows(self, token: str | None) -> bool:
        """Whether ``token`` is granted anything: the server asks before it reads a body."""
        return token is not None and (token in self._full or token in self._read)

    def _grants(self, token: str | None) -> Callable[[str], bool] | None:
        if token in self._full:
            return lambda command: True
        if token in self._read:
            return lambda command: command.lower() in READ_COMMANDS
        return None

    def unauthorized(self, token: str | None) -> Answer:
        why = ("no token - send the header Authorization: Bearer <token>" if not token
               else "the token is not known to this store")
        return Answer(401, env.JSON_TYPE, env.denied(why))

    # -- tool_list ---------------------------------------------------------------------------

    def tool_list(self, token: str | None, request: dict[str, Any], started: float | None = None) -> Answer:
        t0 = time.perf_counter() if started is None else started
        self._latency()
        granted = self._grants(token)
        if granted is None:
            return self.unauthorized(token)
        unit = request.get("unit")
        tools = self.registry.tools()
        if unit is not None:
            if not isinstance(unit, str):
                return self._refuse("unit is the tool's address, a string - or leave it out for every "
                                    "tool.", t0, tools=[])
            tool = self.registry.find(unit)
            if tool is None:
                return self._refuse(f"ACCESS_DENIED: no such tool: {unit}", t0, tools=[])
            tools = [tool]
        listed = [_listed(t, granted) for t in tools]
        message = f"The tool {tools[0].unit}" if unit is not None else f"The store's {len(listed)} tools"
        data = {"result": True, "message": message, "tools": listed}
        return Answer(200, env.JSON_TYPE, env.envelope(data, _ms(t0)))

    # -- tool_run ----------------------------------------------------------------------------

    def tool_run(self, token: str | None, request: dict[str, Any], parts: Iterable[Part] | None = None,
                 idempotency_key: str | None = None, started: float | None = None, *,
                 traceparent: str | None = None) -> Answer:
        """One call; ``parts`` are the request's file parts, read as the files are laid out.

        ``traceparent`` is kept in the call's ``ops`` row when it is a valid W3C header (anything
        else is ignored, as the Trace Context recommendation asks of a receiver).
        """
        t0 = time.perf_counter() if started is None else started
        self._latency()
        granted = self._grants(token)
        if granted is None or token is None:
            return self.unauthorized(token)
        key = idempotency_key if self.config.idempotency else None
        call = _Call(token, t0, key, traceparent if _valid_traceparent(traceparent) else None)
        if key is None:
            return self._replied(call, self._run(call, granted, request, parts))
        with self.idempotency.claim(token, key) as claim:
            if claim.stored is not None:
                return Answer(claim.stored.status, claim.stored.content_type, claim.stored.body)
            call.claim = claim
            answer = self._run(call, granted, request, parts)
            if answer.ran and not call.kept:
                claim.keep(Stored(answer.status, answer.content_type, answer.body))
        return self._replied(call, answer)

    def _replied(self, call: _Call, answer: Answer) -> Answer:
        """The answer of a call carried out, once ``reply_delay_ms`` has passed (its key kept)."""
        if call.recorded and self.config.reply_delay_ms > 0:
            time.sleep(self.config.reply_delay_ms / 1000)
        return answer

    def _latency(self) -> None:
        if self.config.latency_ms > 0:
            time.sleep(self.config.latency_ms / 1000)

    def _refuse(self, message: str, t0: float, **extra: Any) -> Answer:
        return Answer(200, env.JSON_TYPE, env.envelope({**env.refusal(message), **extra}, _ms(t0)))

    def _run(self, call: _Call, granted: Callable[[str], bool], request: dict[str, Any],
             parts: Iterable[Part] | None) -> Answer:
        t0 = call.started
        unit, name = request.get("unit"), request.get("command")
        if not isinstance(unit, str) or not unit.strip():
            return self._refuse("unit is required - name the tool's address from tool_list, "
                                "like MELBIS_AGENT_CURRENCY.", t0)
        if not isinstance(name, str) or not name.strip():
            return self._refuse("command is required - name one of the tool's commands from tool_list, "
                                "like CmdList.", t0)
        tool = self.registry.find(unit)
        if tool is None:
            return self._refuse(f"ACCESS_DENIED: no such tool: {unit}", t0)
        command = tool.command(name)
        if command is None:
            return self._refuse(f"Unknown command [{name}]. The tool has: "
                                f"{', '.join(c.name for c in tool.commands)}", t0)
        if not granted(command.name):
            return self._refuse(f"ACCESS_DENIED: the command {tool.unit}\\{command.name} is not granted "
                                "to this token.", t0)
        try:
            call.debug = bool(cast("bool", request.get("debug") or False))
        except CastError:
            return self._refuse("debug is true or false.", t0)
        params = request.get("params")
        params = {} if params is None else params
        if not isinstance(params, dict):
            return self._refuse('params is an object of fields - send {"name": value, ...}.', t0)
        try:
            fields = check_fields(command, params)
        except FieldError as exc:
            return self._refuse(str(exc), t0)
        entries = request.get("files")
        entries = [] if entries is None else entries
        if not isinstance(entries, list):
            return self._refuse('files is a list of entries - send [{"part": "data_1", "entity": "store", '
                                '"elem_id": <id>}, ...].', t0)
        files_param = command.files_param()
        if entries and files_param is None:
            return self._refuse(f"The command [{command.name}] takes no files - send the call without "
                                "attachments, or to a command with a files field.", t0)
        if files_param is not None and files_param.required and not entries:
            return self._refuse(f"The command [{command.name}] carries the files themselves - attach them "
                                "to the call, one entry of files for each.", t0)
        with self.db.connect() as conn:
            sent: list[dict[str, Any]] = []
            if entries and files_param is not None:
                try:
                    sent = self.attachments.lay_out(conn, check_entries(conn, entries), parts)
                except AttachmentError as exc:
                    return self._refuse(str(exc), t0)
                fields[files_param.name] = sent
            return self._module_call(call, conn, tool=tool, command=command, fields=fields, sent=sent)

    def _module_call(self, call: _Call, conn: sqlite3.Connection, *, tool: Tool, command: Command,
                     fields: dict[str, Any], sent: list[dict[str, Any]]) -> Answer:
        where = f"{tool.unit}\\{command.name}"
        try:
            module = _module(tool)
        except Exception as exc:  # noqa: BLE001 - a module that cannot load is the module's crash
            return _crash(f"{where} failed: the module does not load ({exc})")
        if module is None:
            return _crash(f"Module not found! [units/{tool.module}]")
        func = _function(module, command.name)
        if func is None:
            return _crash(f"Function not found! [{where}]")
        sql = Sql(conn)
        ctx = Ctx(sql, tool.unit, command.name, call.token, self.config.root, sent, self.config.order_ms)
        t1 = time.perf_counter()
        try:
            raw = func(ctx, fields)
        except Exception as exc:  # noqa: BLE001 - a module's crash is an answer, as in the store
            raw = exc
        call.unit_ms = _ms(t1)
        call.sql = (sql.count, round(sql.seconds * 1000)) if call.debug else None
        answer = self._answer(call, conn, raw, where=where, command=command, sent=sent)
        if is_recorded(func):
            # The call's record and the answer its key keeps in one commit: a store killed between
            # the two would run a repeat of the key again, the call's record already there.
            with transaction(conn):
                self._record(conn, tool, command, fields, call)
                call.recorded = True
                if call.claim is not None and answer.ran:
                    call.claim.keep(Stored(answer.status, answer.content_type, answer.body), conn)
                    call.kept = True
        return answer

    def _answer(self, call: _Call, conn: sqlite3.Connection, raw: Any, *, where: str, command: Command,
                sent: list[dict[str, Any]]) -> Answer:
        """What the store answers of what the module gave back (``raw``: its result, or what it raised)."""
        if isinstance(raw, Exception):
            return _crash(f"{where} failed: {raw}", ran=True)
        if not isinstance(raw, dict) or "result" not in raw:
            return _crash(f"{where} answered without result", ran=True)
        if not isinstance(raw["result"], bool):
            return _crash(f"{where} answered result {env.dumps(raw['result']).decode()} - it must be true "
                          "or false", ran=True)
        data = env.complete(raw)
        if sent:
            self._clear_untaken(conn, command, data, sent)
        try:
            body = env.envelope(data, _ms(call.started), call.unit_ms, call.sql)
        except (TypeError, ValueError) as exc:
            return _crash(f"{where} failed: its answer is not JSON ({exc})", ran=True)
        return Answer(200, env.JSON_TYPE, body, ran=True)

    def _clear_untaken(self, conn: sqlite3.Connection, command: Command, data: dict[str, Any],
                       sent: list[dict[str, Any]]) -> None:
        files = data["files"] if isinstance(data["files"], list) else []
        kept = {f.get("id") for f in files if isinstance(f, dict)}
        gone = [row for row in sent if row["id"] not in kept]
        if not gone:
            return
        self.attachments.remove(conn, gone)
        sentence = (f"The {len(gone)} file(s) sent with this call are gone: the command [{command.name}] did "
                    "not take them.")
        message = data["message"] if isinstance(data["message"], str) else str(data["message"])
        message = message.rstrip()
        if message and not message.endswith((".", "!", "?")):
            message += "."
        data["message"] = f"{message} {sentence}".lstrip()

    def _record(self, conn: sqlite3.Connection, tool: Tool, command: Command, fields: dict[str, Any],
                call: _Call) -> None:
        conn.execute("INSERT INTO ops (unit, command, params, idempotency_key, time, traceparent) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (tool.unit, command.name, json.dumps(fields, ensure_ascii=False, default=str), call.key,
                      datetime.now(timezone.utc).isoformat(timespec="milliseconds"), call.traceparent))


#: version-trace_id-parent_id-flags, lower-case hex; an id of zeros is invalid.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def _valid_traceparent(value: str | None) -> bool:
    return value is not None and not value.startswith("ff") and _TRACEPARENT.fullmatch(value) is not None


def _ms(t0: float) -> int:
    return round((time.perf_counter() - t0) * 1000)


def _crash(text: str, ran: bool = False) -> Answer:
    return Answer(500, env.TEXT_TYPE, text.encode("utf-8"), ran=ran)


def _listed(tool: Tool, granted: Callable[[str], bool]) -> dict[str, Any]:
    return tool.listed(granted)


def _module(tool: Tool) -> ModuleType | None:
    """The tool's module in ``pooler.store.tools``; ``None`` when the store has no such module."""
    try:
        return importlib.import_module(f"{TOOLS_PACKAGE}.{tool.module_stem}")
    except ModuleNotFoundError as exc:
        if exc.name in (f"{TOOLS_PACKAGE}.{tool.module_stem}", TOOLS_PACKAGE):
            return None
        raise


def _function(module: ModuleType, name: str) -> CommandFunc | None:
    """The module's function for the command, whatever the case of its name."""
    wanted = name.lower()
    for attr in dir(module):
        if attr.lower() == wanted and attr.startswith(("Cmd", "cmd")):
            func = getattr(module, attr)
            if callable(func):
                found: CommandFunc = func
                return found
    return None


def _schemas(registry: Registry) -> list[str]:
    """The tables the store's own tool modules add (``SCHEMA``), created at start."""
    out = []
    for tool in registry.tools():
        module = _module(tool)
        schema = getattr(module, "SCHEMA", None) if module is not None else None
        if isinstance(schema, str):
            out.append(schema)
    return out
