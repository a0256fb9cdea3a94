"""The tools ``pooler mcp`` offers, as an agent reads them: names, descriptions, input schemas.

The schemas tell an agent what to send; the server still checks every argument itself (the SDK does
not), so a wrong call gets the seeds' refusal texts rather than a schema validator's.  Every input
has one type: an optional input is one that is not required, never a union with null, because
clients that fill arguments from text (the MCP Inspector's ``--tool-arg``) convert a value only for
a single declared type.  What each tool answers is declared in ``pooler.mcp.outputs``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from pooler.mcp.outputs import POOL_RUN_OUTPUT, TOOL_LIST_OUTPUT, TOOL_POOL_OUTPUT, TOOL_RUN_OUTPUT
from pooler.pool.budget import KINDS
from pooler.pool.rules import INTO_PATTERN, MAX_INTO, NAME_PATTERN

#: The most steps one tool_pool call takes; more is refused before anything runs.
MAX_POOL_STEPS = 200

_PATH_NOTE = (
    "An absolute path, or a path inside the folder this server writes to (its --out folder); "
    "a relative path that climbs out of that folder is refused."
)

_FILE_ENTRY: dict[str, Any] = {
    "type": "object",
    "description": "One attachment. Fields beyond these travel to the store with the file.",
    "properties": {
        "file": {"type": "string",
                 "description": "The file on this computer. " + _PATH_NOTE + " Only its bytes and base name "
                                "are sent, never the path."},
        "entity": {"type": "string", "description": "The table that owns the file, for example store."},
        "elem_id": {"type": "integer", "description": "The id of the row the file belongs to."},
        "kind_key": {"type": "string", "description": "The kind of file; kBase when left out."},
        "real_name": {"type": "string", "description": "A name for people; the file's name when left out."},
    },
    "required": ["file", "entity", "elem_id"],
}

_UNIT = {"type": "string", "minLength": 1,
         "description": "The tool's address as tool_list gives it, for example MELBIS_AGENT_CURRENCY."}
_COMMAND = {"type": "string", "minLength": 1,
            "description": "One of that tool's commands, for example CmdList (the store does not mind "
                           "its case)."}
_PARAMS = {"type": "object",
           "description": "The command's fields, each with a value of the type tool_list declares. "
                          "A field set to null counts as left out. A jsonl field may be given as "
                          "{\"file\": \"rows.jsonl\"}: the file is read here and sent as the list of rows."}
_PARAMS_SOURCE = {"type": "string",
                  "description": "A JSON file holding the object of fields, sent instead of params "
                                 "(not both). " + _PATH_NOTE}
_DEBUG = {"type": "boolean",
          "description": "Also report how many queries the command ran and how long they took (time.sql, "
                         "time.sql_ms)."}
_INTO = {"type": "string", "pattern": INTO_PATTERN, "maxLength": MAX_INTO,
         "description": "A job name, one word with no path and no dot: every table of the answer is also "
                        "appended to <out>/<into>.<table>.jsonl, which only grows, while the table's own "
                        "file is replaced by the next call."}

_ALLOWANCE: dict[str, Any] = {
    "type": "string", "pattern": "^([0-9]+|(100(\\.0+)?|[0-9]{1,2}(\\.[0-9]+)?)%)$",
    "description": "A number of calls (\"25\"), or a percent of the planned calls (\"2%\", rounded "
                   "up to calls)."}
_TOLERATE: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": dict.fromkeys(KINDS, _ALLOWANCE),
    "description": "An error budget: how many calls may fail (failed) or end in doubt (in_doubt) while "
                   "the pool goes on, whatever stop_on_error says; the first one over it stops the pool.",
}

_RATE: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["per_second"],
    "properties": {
        "per_second": {"type": "number", "minimum": 0.01, "maximum": 10000,
                       "description": "Calls started a second, at most."},
        "burst": {"type": "integer", "minimum": 1, "maximum": 1000,
                  "description": "How many may start at once after a quiet spell (default 1)."},
        "key": {"type": "string",
                "description": "A dotted path into each call's params: a bucket per value."},
    },
    "description": "A limit on calls started, held for the task as a whole.",
}

_BUSY_FOR: dict[str, Any] = {
    "type": "number", "minimum": 0, "maximum": 86400,
    "description": "Seconds a call the store answers busy (429, or 503 with Retry-After) is sent again, "
                   "behind the pause the store asks and without using an attempt (default 600); a call "
                   "still busy after that is not_run, and the pool stops, for a redrive."}
_RETRY: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "attempts": {"type": "integer", "minimum": 1, "maximum": 10,
                     "description": "How many times the call is tried in all (default 1)."},
        "backoff_ms": {"type": "integer", "minimum": 0, "maximum": 600000,
                       "description": "Milliseconds before the first retry, doubled before each next one."},
        "on_in_doubt": {"type": "boolean",
                        "description": "Also send again a call whose answer was lost; safe only with a key."},
        "busy_for": {**_BUSY_FOR, "description": str(_BUSY_FOR["description"]) + " Wins over the pool's."},
        "refusals": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
                     "description": "Refusals that mean the store is busy (a lock another client holds): "
                                    "a text the refusal's message contains, or a /regular expression/. "
                                    "Such a refused call is sent again after the backoff, under its key's "
                                    "next round, within attempts; any other refusal fails at once."},
    },
    "description": "Trying the call again.",
}

_STEP: dict[str, Any] = {
    "type": "object",
    "description": "One call of a store tool. Steps hold JSON only: a command that takes files goes "
                   "through tool_run.",
    "properties": {
        "name": {"type": "string", "pattern": NAME_PATTERN,
                 "description": "A word later steps use to refer to this one, without a dot; unique in the "
                                "pool, case not told apart."},
        "unit": _UNIT,
        "command": _COMMAND,
        "params": {**_PARAMS, "description": str(_PARAMS["description"])
                   + " A string that is exactly \"@name.field\" (deeper: \"@name.row.id\", into lists by "
                     "0-based index) is replaced by that field of the detail of the earlier step with that "
                     "name, keeping its type; a field the detail lacks stops the pool there."},
        "params_source": _PARAMS_SOURCE,
        "debug": _DEBUG,
        "into": _INTO,
        "key": {"type": "string", "minLength": 1,
                "description": "A stable identity for a call with side effects: a keyed call runs at most "
                               "once per task, so calling the same pool again skips the keyed steps that "
                               "already landed (status skipped). Keys are unique within a pool."},
        "tolerate": {**_TOLERATE, "description": "This step's error budget, counting its own calls; it "
                                                 "wins over the pool's."},
        "rate": {**_RATE, "description": "This step's own limit on calls started; it wins over the pool's."},
        "retry": _RETRY,
        "probe": {"type": "object", "required": ["command", "landed"],
                  "description": "How to find out whether a call of this step landed when its answer was "
                                 "lost: a read (never sent under the call's key). landed true in the "
                                 "probe's detail: the call is completed, with the probe's detail field "
                                 "named by detail as its detail; landed false in an answer with result "
                                 "true: the call is sent again once; anything else: it stays in doubt.",
                  "properties": {
                      "unit": {**_UNIT, "description": "The probe's tool, when not the step's own."},
                      "command": {**_COMMAND, "description": "The read's command."},
                      "params": {"type": "object", "description": "The read's fields."},
                      "landed": {"type": "string", "minLength": 1,
                                 "description": "The field of the probe's detail that is true when the "
                                                "call landed."},
                      "detail": {"type": "string", "minLength": 1,
                                 "description": "The field of the probe's detail that stands for the "
                                                "call's detail."}},
                  "additionalProperties": False},
    },
    "required": ["unit", "command"],
}

TOOL_LIST = types.Tool(
    name="tool_list",
    title="List the store's AI tools",
    description=(
        "The AI tools the store declares: every tool's address (unit), its commands, whether each command "
        "is granted to this token, and each command's fields with their type, whether required, and default. "
        "Read it before tool_run or tool_pool to get names and field types right."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "unit": {"type": "string",
                     "description": "Only this tool, by its address; leave out to list them all."},
        },
        "additionalProperties": False,
    },
    output_schema=TOOL_LIST_OUTPUT,
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
)

TOOL_RUN = types.Tool(
    name="tool_run",
    title="Run one command of a store tool",
    description=(
        "Carries out one command of one of the store's AI tools and returns its answer: result (true: done, "
        "false: refused, with the answer marked as an error), message (what happened and what to do next), "
        "detail (the values the command returned, such as the id of a new row), tables (for each table: "
        "rows, the file its rows were written to, and its first three rows as text), files (the "
        "attachments the command kept) and time (server, module and round-trip milliseconds). "
        "Attachments go in files or files_source and are read from this computer. "
        "A store crash comes back as plain text marked as an error."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "unit": _UNIT,
            "command": _COMMAND,
            "params": _PARAMS,
            "params_source": _PARAMS_SOURCE,
            "files": {"type": "array", "items": _FILE_ENTRY,
                      "description": "The attachments, for a command that takes files "
                                     "(not with files_source)."},
            "files_source": {"type": "string",
                             "description": "A JSON file holding the list of attachments, sent instead of "
                                            "files (not both). " + _PATH_NOTE},
            "debug": _DEBUG,
            "into": _INTO,
        },
        "required": ["unit", "command"],
        "additionalProperties": False,
    },
    output_schema=TOOL_RUN_OUTPUT,
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True),
)

TOOL_POOL = types.Tool(
    name="tool_pool",
    title="Run many store commands in one call",
    description=(
        f"Carries out up to {MAX_POOL_STEPS} store commands in one call, so a batch costs one turn instead "
        "of one per row. Each step is an ordinary tool_run call (JSON only, no files) and is refused or "
        "answered exactly as a separate call would be. A step can take a value from an earlier step's "
        "detail with \"@name.field\". The whole pool is checked before the first step; then, by default, "
        "the steps go one at a time in order and the first refusal or crash stops the pool, with no "
        "rollback. "
        "The answer: result (true when every step landed), status (completed, failed or partial), counts, "
        "steps (each with num, name, unit, command, status and the command's answer; the step the pool "
        "stopped on stands last) and time. A stopped pool is marked as an error. "
        "Give a key to every step with side effects: calling the same pool again then skips what already "
        "landed instead of doing it twice. "
        "The safe way for writes: call with plan: true (nothing is sent; you get the plan and a plan_id), "
        "then commit with {\"plan_id\": ...} - a commit runs once, however often it is sent. Every "
        "answer names its task; {\"task\": ...} alone tells what that task has done so far."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pool": {"type": "array", "items": _STEP, "minItems": 1, "maxItems": MAX_POOL_STEPS,
                     "description": "The steps, in the order they run (not with pool_source)."},
            "pool_source": {"type": "string",
                            "description": "A JSON file holding the list of steps, instead of pool "
                                           "(not both). " + _PATH_NOTE
                                           + " Relative paths inside it are taken from its own folder."},
            "mode": {"type": "string", "enum": ["sequential", "parallel"],
                     "description": "sequential (the default): one step at a time, in order - the safe "
                                    "choice for writes. parallel: several at once; a step that refers to "
                                    "another still waits for it."},
            "max_concurrency": {"type": "integer", "minimum": 1, "maximum": 16,
                                "description": "parallel only: how many steps at once (default 4)."},
            "serialize_on": {"type": "string",
                             "description": "parallel only: a dotted path into each step's params; steps "
                                            "whose value there is equal run one after another, the others "
                                            "side by side. Set it to what the store locks on."},
            "stop_on_error": {"type": "boolean",
                              "description": "Start no further step after the first failure (default true); "
                                             "steps already running finish."},
            "tolerate": _TOLERATE,
            "rate": _RATE,
            "adaptive": {"type": "boolean",
                         "description": "With mode parallel: start at 2 calls in flight and grow toward "
                                        "max_concurrency while the store answers cleanly; cut back on 429s "
                                        "and gateway answers, never on latency alone, and pace calls at the "
                                        "rate the 429s taught (default false)."},
            "breaker": {
                "type": "object", "additionalProperties": False,
                "properties": {
                    "after": {"type": "integer", "minimum": 1, "maximum": 1000,
                              "description": "Requests in a row that never reached the store (default 5)."},
                    "wait": {"type": "number", "minimum": 0, "maximum": 3600,
                             "description": "Seconds the store is tried with tool_list before the pool "
                                            "stops (default 60)."},
                },
                "description": "When a store that looks down stops the pool: the calls not started stay "
                               "not_run, for a redrive. On by default ({after: 5, wait: 60}).",
            },
            "retry": {"type": "object", "additionalProperties": False,
                      "properties": {"busy_for": _BUSY_FOR},
                      "description": "The pool's patience with a busy store, for the steps without "
                                     "their own."},
            "include_results": {"type": "boolean",
                                "description": "Put each step's detail, tables and files into the answer "
                                               "(default true); large results are left out and marked "
                                               "result_omitted, their tables stay in their files."},
            "task": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
                     "description": "The task keys are remembered under. Left out, every call of one "
                                    "client's session shares one task; name one to keep skipping landed "
                                    "keys across sessions and restarts of the server. Given alone (no "
                                    "pool): the answer of that task so far, from the journal - what "
                                    "landed, what is in doubt - sending nothing."},
            "plan": {"type": "boolean",
                     "description": "true: check the whole pool against the store's declarations and "
                                    "return its plan (calls, keys, order, problems) with a plan_id, "
                                    "sending nothing."},
            "plan_id": {"type": "string",
                        "description": "Run the plan with this id, exactly as planned, once: given again "
                                       "(a retry after a lost answer) it sends nothing and returns the "
                                       "plan's answer, waiting for it if the first commit still runs. "
                                       "Given alone."},
        },
        "additionalProperties": False,
    },
    output_schema=TOOL_POOL_OUTPUT,
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True),
)

POOL_RUN = types.Tool(
    name="pool_run",
    title="Run a pool file",
    description=(
        "Run a pool file this server can read, as `pooler run` runs it: steps over rows (for_each over a "
        "data file, in chunks), keys, error budgets, rates and flow control all apply, with no limit on "
        "the number of calls. The answer has the counts of calls (a step over rows is one entry with its "
        "rows' counts and its failed calls) and the task; tool_pool {\"task\": ...} tells a task's "
        "answer so far at any time, sending nothing. Call it again with the same arguments after a lost "
        "answer: the calls that landed are skipped. dry_run: true shows the plan (calls, rows, keys, "
        "order) and sends nothing. The safe way for writes: plan: true writes the plan (the file `pooler "
        "plan` writes; with compare: its calls counted new, changed and unchanged) and returns a plan_id; "
        "pool_run {\"plan_id\": ...} commits it as `pooler apply` applies a plan: once, refused when "
        "the pool, a data file or the store's declarations changed since, and a call whose rows moved in "
        "the store since the plan is a conflict, not sent and listed in the answer."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "file": {"type": "string", "minLength": 1,
                     "description": "The pool file (YAML or JSON). " + _PATH_NOTE + " Its data files are "
                                    "read from beside it, as `pooler run` reads them."},
            "vars": {"type": "object", "additionalProperties": {"type": "string"},
                     "description": "Values of the variables the pool declares, by name, as `pooler run "
                                    "--var NAME=VALUE` gives them (a number or true/false is taken as its "
                                    "text)."},
            "sample": {"type": "integer", "minimum": 1,
                       "description": "Only the first N rows of every step over rows: a trial run."},
            "task": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
                     "description": "The task keys are remembered under, as for tool_pool. Left out, the "
                                    "session's task."},
            "dry_run": {"type": "boolean",
                        "description": "true: check the pool and read its data files, and return the plan "
                                       "(calls, rows, keys, order, budgets); nothing is sent."},
            "plan": {"type": "boolean",
                     "description": "true: check the pool against the store's declarations, read its "
                                    "data files and compares, and write its plan: the answer has its "
                                    "plan_id, plan_file and the calls of each step (with compare: how "
                                    "many rows are new, changed, unchanged); nothing is sent."},
            "plan_id": {"type": "string",
                        "description": "Commit the plan with this id (of pool_run or tool_pool), exactly "
                                       "as planned, once: given again it sends nothing and returns the "
                                       "plan's answer. Given alone."},
        },
        "additionalProperties": False,
    },
    output_schema=POOL_RUN_OUTPUT,
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True),
)

TOOLS: tuple[types.Tool, ...] = (TOOL_LIST, TOOL_RUN, TOOL_POOL, POOL_RUN)


def argument_names(tool: str) -> tuple[str, ...]:
    """The argument names a tool's input schema declares."""
    for declared in TOOLS:
        if declared.name == tool:
            return tuple(declared.input_schema["properties"])
    return ()
