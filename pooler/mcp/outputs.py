"""The output schemas of the tools: what their ``structuredContent`` holds, for a client to
check or type it.

Each schema states what every answer of its tool carries and leaves room for more (a store may add
keys of its own to a command's answer; the engine adds keys over time), so a client that checks
answers never breaks on a newer pooler.  tests/mcpkit.py validates every structured answer the
test suite receives against these.
"""

from __future__ import annotations

from typing import Any

from pooler.statuses import CallStatus, StepStatus

_TIME: dict[str, Any] = {
    "type": "object",
    "description": "Milliseconds: server (the store's whole answer), module (the command), trip (the "
                   "round trip seen here); with debug also sql (the queries) and sql_ms.",
    "additionalProperties": True,
}

_TABLE: dict[str, Any] = {
    "type": "object",
    "description": "One table of the answer, written to a file.",
    "properties": {
        "rows": {"type": "integer", "description": "How many rows the table has."},
        "file": {"type": "string", "description": "The JSONL file its rows were written to."},
        "head": {"type": "array", "items": {"type": "string"},
                 "description": "Its first three rows as JSON text, each cut to 300 characters."},
        "job": {"type": "string", "description": "With into: the job file the rows were appended to."},
        "job_rows": {"type": "integer", "description": "With into: the rows the job file holds now."},
    },
    "required": ["rows", "file", "head"],
}

_COMMAND_ANSWER: dict[str, Any] = {
    "result": {"type": "boolean", "description": "true: the command was carried out; false: refused."},
    "message": {"type": "string", "description": "What happened, and what to do next."},
    "detail": {"type": "object", "description": "The values the command returned, such as a new row's id."},
    "tables": {"type": "object", "additionalProperties": _TABLE,
               "description": "For each table of the answer: its rows, its file and its first rows."},
    "files": {"type": "array", "items": {"type": "object"},
              "description": "The attachments the command kept."},
    "time": _TIME,
}

TOOL_LIST_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "result": {"type": "boolean", "description": "true when the store listed its tools."},
        "message": {"type": "string", "description": "The store's word on the listing."},
        "tools": {"type": "array", "items": {
            "type": "object", "description": "One tool: unit, name, descr, commands (each with name, "
                                             "descr, granted and params)."},
                  "description": "The tools, as the store declares them."},
    },
    "required": ["result"],
}

TOOL_RUN_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": _COMMAND_ANSWER,
    "required": ["result", "message", "detail", "tables", "files", "time"],
}

_RUN_STEP: dict[str, Any] = {
    "type": "object",
    "description": "A step that ran (or the one the pool stopped on): its place, its status and, when "
                   "it reached the store, the command's answer.",
    "properties": {
        "num": {"type": "integer", "description": "The step's place in the pool, from 1."},
        "name": {"type": "string", "description": "The step's name, or empty."},
        "unit": {"type": "string", "description": "The tool's address."},
        "command": {"type": "string", "description": "The command."},
        "status": {"type": "string", "enum": [*(s.value for s in CallStatus), StepStatus.PARTIAL.value],
                   "description": "completed, failed, skipped (its key landed before in this task), "
                                  "not_run, or in_doubt (sent, its answer never recorded: it may or may "
                                  "not have been carried out); partial for a step over rows some of whose "
                                  "calls landed and others not."},
        "key": {"type": ["string", "null"], "description": "The step's key, or null."},
        **{k: v for k, v in _COMMAND_ANSWER.items() if k != "tables"},
        "tables": {"type": "object", "description": "As in a tool_run answer."},
    },
    "required": ["num", "unit", "command", "status", "result"],
}

_PLAN_STEP: dict[str, Any] = {
    "type": "object",
    "description": "A call the plan will make, in order.",
    "properties": {
        "num": {"type": "integer", "description": "The step's place in the pool, from 1."},
        "name": {"type": ["string", "null"], "description": "The step's name, or null."},
        "unit": {"type": "string", "description": "The tool's address."},
        "command": {"type": "string", "description": "The command."},
        "key": {"type": ["string", "null"],
                "description": "The key the call will carry (it runs at most once in the task), or null."},
        "waits_for": {"type": "array", "items": {"type": "string"},
                      "description": "The earlier steps whose detail it refers to."},
        "after": {"type": ["string", "null"],
                  "description": "sequential: the step it follows; null for the first, or in parallel."},
    },
    "required": ["num", "unit", "command", "key", "waits_for"],
}

TOOL_POOL_OUTPUT: dict[str, Any] = {
    "type": "object",
    "description": "A pool's answer (a run, a commit, or a task looked up: status, counts, steps), or "
                   "with plan: true its plan (plan_id, calls, steps, problems). Every answer names its "
                   "task.",
    "properties": {
        "result": {"type": "boolean",
                   "description": "A run: true when every step landed. A plan: true when it can be "
                                  "committed."},
        "task": {"type": "string",
                 "description": "The task the pool runs (or ran) under: tool_pool {\"task\": ...} tells "
                                "its answer so far at any time."},
        "status": {"type": "string",
                   "description": "completed, failed or partial; running while a looked-up task goes "
                                  "on; planned for a plan, refused for a plan with problems."},
        "total": {"type": "integer", "description": "The calls of the pool."},
        "succeeded": {"type": "integer", "description": "Calls that landed now."},
        "failed": {"type": "integer", "description": "Calls that failed or are in doubt."},
        "skipped": {"type": "integer", "description": "Keyed calls that had landed before."},
        "not_run": {"type": "integer", "description": "Calls never started."},
        "calls_in_doubt": {"type": "integer", "description": "Of the failed: calls whose answer was lost."},
        "in_doubt": {"type": "array", "items": {"type": "object"},
                     "description": "The calls in doubt, each with what to do about it."},
        "steps": {"type": "array", "items": {"anyOf": [_RUN_STEP, _PLAN_STEP]},
                  "description": "A run: the steps that ran, in step order. A plan: the calls it will "
                                 "make, in order."},
        "time": {"type": "object", "description": "trip: the pool's milliseconds."},
        "interrupted": {"type": "string", "description": "Why the pool stopped before its end."},
        "probes": {"type": "object",
                   "description": "What the probes of calls in doubt settled (when a step's probe was "
                                  "sent): landed, not_landed, unsettled."},
        "plan_id": {"type": ["string", "null"],
                    "description": "A plan: its id, to commit with tool_pool {\"plan_id\": ...}; null when "
                                   "the plan has problems."},
        "expires": {"type": ["string", "null"],
                    "description": "A plan: when it can no longer be committed (UTC, ISO 8601)."},
        "calls": {"type": "integer", "description": "A plan: how many calls it will make."},
        "problems": {"type": "array", "items": {"type": "string"},
                     "description": "A plan: every problem the check found; nothing is sent while any "
                                    "is left."},
        "message": {"type": "string", "description": "What happened, and what to do next."},
        "notes": {"type": "array", "items": {
                      "type": "object", "required": ["step", "at", "reference", "nearly_names", "message"],
                      "properties": {"step": {"type": "integer"}, "at": {"type": "string"},
                                     "reference": {"type": "string"},
                                     "nearly_names": {"type": "object"}, "message": {"type": "string"}}},
                  "description": "Only when there is one: each \"@name.field\" that names no step but "
                                 "nearly names an earlier one (step, where in its params, the step it "
                                 "nearly names, did you mean). It goes as text, a word of data; write "
                                 "@@ to send such text without a note."},
    },
    "required": ["result", "task"],
}

_DRY_STEP: dict[str, Any] = {
    "type": "object",
    "description": "A step of a dry run's plan: its calls (null while its rows cannot be counted "
                   "before the run), its rows, its key, what it waits for.",
    "properties": {
        "num": {"type": "integer", "description": "The step's place in the pool, from 1."},
        "unit": {"type": "string", "description": "The tool's address."},
        "command": {"type": "string", "description": "The command."},
        "calls": {"type": ["integer", "null"], "description": "The calls the step will make."},
        "rows": {"type": "object", "description": "A step over rows: its source, count and chunk."},
        "key": {"type": "object", "description": "The key's template and its first value."},
        "waits_for": {"type": "array", "items": {"type": "string"},
                      "description": "The earlier steps it refers to."},
    },
    "required": ["num", "unit", "command", "calls", "waits_for"],
}

POOL_RUN_OUTPUT: dict[str, Any] = {
    "type": "object",
    "description": "A run's answer (status, counts of calls, steps: a step over rows is one entry with "
                   "its rows' counts and its failed calls), or with dry_run: true its plan, or with plan: "
                   "true its plan with a plan_id to commit. Every answer names its task.",
    "properties": {
        **{k: v for k, v in TOOL_POOL_OUTPUT["properties"].items()
           if k not in ("steps", "calls", "problems")},
        "dry_run": {"type": "boolean", "description": "true: a plan; nothing was sent."},
        "plan_file": {"type": "string",
                      "description": "A plan (plan: true): its file, as `pooler plan` writes it "
                                     "(`pooler show FILE` reads it)."},
        "digests": {"type": "array", "items": {"type": "object"},
                    "description": "A plan: the sha256 of what it was made from; its commit is refused "
                                   "when one differs."},
        "compare": {"type": "object", "additionalProperties": {"type": "integer"},
                    "description": "A plan of steps with compare: their rows by class (new, changed, "
                                   "unchanged): the new and changed ones are sent."},
        "pool": {"type": "string", "description": "The pool file."},
        "calls": {"type": ["integer", "null"],
                  "description": "A dry run: the calls the pool will make (null while a step's rows "
                                 "cannot be counted before the run)."},
        "steps": {"type": "array", "items": {"anyOf": [_RUN_STEP, _DRY_STEP]},
                  "description": "A run: the steps that ran, in step order. A dry run: every step's plan."},
    },
    "required": ["result", "task"],
}
