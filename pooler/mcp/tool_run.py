"""tool_list and tool_run as ``pooler mcp`` serves them (seed tool_run.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pooler.client.answer_scan import TableRows
from pooler.client.arguments import prepare_call
from pooler.client.http import Reply, ToolRunClient
from pooler.mcp.arguments import check_names, confine, optional, required_name
from pooler.mcp.outcome import Outcome, answered, refused
from pooler.run.tables import TableWriter

#: The keys of the seed's answer; anything else the command returned travels after them.
_FIVE = ("result", "message", "detail", "tables", "files")


def is_text_refusal(reply: Reply) -> bool:
    """An answer with no envelope: a crash, a 401, or anything else that was not the store's JSON."""
    return reply.server_ms is None and not reply.result and set(reply.data) <= {"result", "message"}


def confine_jsonl_fields(params: Any, out: Path, where: str) -> None:
    """Apply the folder rule to fields written ``{"file": "rows.jsonl"}``, as callargs reads them."""
    if not isinstance(params, dict):
        return
    for name, value in params.items():
        if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("file"), str):
            confine(value["file"], out, f"the file of {where} field {name}")


def confine_entries(files: Any, out: Path) -> None:
    """Apply the folder rule to the ``file`` of every attachment entry."""
    if not isinstance(files, list):
        return
    for num, entry in enumerate(files, start=1):
        if isinstance(entry, dict):
            confine(entry.get("file"), out, f"the file of attachment {num}")


def _reread(name: str, out: Path) -> Any:
    """A source file callargs has just read and found whole: read again for the paths inside it."""
    path = Path(name).expanduser()
    return json.loads((path if path.is_absolute() else out / path).read_text(encoding="utf-8-sig"))


class StoreCalls:
    """tool_list and tool_run against one store, tables written under ``out``."""

    def __init__(self, client: ToolRunClient, out: Path) -> None:
        self.client = client
        self.out = out
        # One writer for the whole session, so a job's row count is kept rather than recounted.
        self.tables = TableWriter(out)

    def tool_list(self, arguments: Mapping[str, Any]) -> Outcome:
        check_names("tool_list", arguments)
        unit = optional(arguments, "unit", str, "tool_list")
        reply = self.client.tool_list(unit)
        if is_text_refusal(reply):
            return refused(reply.message)
        return answered(dict(reply.data), is_error=not reply.result)

    def tool_run(self, arguments: Mapping[str, Any]) -> Outcome:
        check_names("tool_run", arguments)
        unit = required_name(arguments, "unit", "tool_run", "MELBIS_AGENT_CURRENCY",
                             "name the tool's address from tool_list")
        command = required_name(arguments, "command", "tool_run", "CmdList",
                                "name one of the tool's commands from tool_list")
        params_source = optional(arguments, "params_source", str, "tool_run")
        files_source = optional(arguments, "files_source", str, "tool_run")
        debug = bool(optional(arguments, "debug", bool, "tool_run"))
        params, files = arguments.get("params"), arguments.get("files")
        confine(params_source, self.out, "params_source")
        confine(files_source, self.out, "files_source")
        confine_jsonl_fields(params, self.out, "params")
        confine_entries(files, self.out)
        call = prepare_call(params=params, params_source=params_source, files=files,
                            files_source=files_source, into=arguments.get("into"), debug=debug,
                            base=self.out)
        # The paths written inside a source file follow the same rule; the file is known whole now.
        if params_source is not None:
            confine_jsonl_fields(_reread(params_source, self.out), self.out, "params_source")
        if files_source is not None:
            confine_entries(_reread(files_source, self.out), self.out)
        reply = self.client.tool_run(unit, command, call.params, files=call.files, debug=call.debug)
        if is_text_refusal(reply):
            return refused(reply.message)
        return answered(self._answer(unit, command, reply, call.into), is_error=not reply.result)

    def _answer(self, unit: str, command: str, reply: Reply, into: str | None) -> dict[str, Any]:
        """The seed's answer: the five keys, the command's own extra keys, then time."""
        data = reply.data
        raw = data.get("tables")
        rows = ({str(k): v for k, v in raw.items() if isinstance(v, list | TableRows)}
                if isinstance(raw, dict) else {})
        detail = data.get("detail")
        files = data.get("files")
        answer: dict[str, Any] = {
            "result": reply.result,
            "message": reply.message,
            "detail": detail if detail is not None else {},
            "tables": self.tables.write(f"{unit}.{command}", rows, into) if rows else {},
            "files": files if files is not None else [],
        }
        answer.update({k: v for k, v in data.items() if k not in _FIVE and k != "time"})
        answer["time"] = reply.time()
        return answer
