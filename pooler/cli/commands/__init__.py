"""One module per command group of the ``pooler`` command line.

``COMMANDS`` names each command's module and its one-line help, so the CLI can list every command
while importing only the one that runs: a short command starts without loading the engine.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("pooler.cli.commands.run", "run a pool file against a store"),
    "redrive": ("pooler.cli.commands.redrive",
                "send again what did not land of a task: failed, in doubt, not run"),
    "plan": ("pooler.cli.commands.plan_cmd",
             "write a pool's plan to a file, checked against the store, nothing sent"),
    "apply": ("pooler.cli.commands.plan_cmd", "run a plan file once, refused when it is stale"),
    "check": ("pooler.cli.commands.check", "check pool files without sending anything"),
    "call": ("pooler.cli.commands.call", "carry out one command of a store's AI tool (tool_run)"),
    "tools": ("pooler.cli.commands.tools", "list the store's AI tools and their fields (tool_list)"),
    "runs": ("pooler.cli.commands.runs", "list recent tasks from the journal"),
    "show": ("pooler.cli.commands.runs", "show one task's recorded answer, or a plan file's summary"),
    "journal": ("pooler.cli.commands.journal_cmd", "create or upgrade a PostgreSQL journal"),
    "gather": ("pooler.cli.commands.journal_cmd",
               "write a task's tables and jobs, from every runner, into one folder"),
}


def help_of(name: str) -> str:
    return COMMANDS[name][1]
