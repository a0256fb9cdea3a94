"""The tools the official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) calls on
the server it tries, served only with ``pooler mcp --conformance-tools``.

None of them is pooler's: a scenario such as ``tools-call-with-progress`` calls a tool of the
suite's own naming and checks what the protocol carries around it (here, progress notifications).
pooler's own tools send progress too, but no agent should be offered a tool that exists only for
a test suite, so these stay off unless the option asks for them.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext

#: What the suite wants told, as progress of ``TOTAL``, about ``PAUSE`` seconds apart.
STEPS = (0, 50, 100)
TOTAL = 100
PAUSE = 0.05

WITH_PROGRESS = types.Tool(
    name="test_tool_with_progress",
    description="For the MCP conformance suite only (pooler mcp --conformance-tools): sends progress 0, 50 "
                "and 100 of 100, 50 ms apart, to a caller that gave a progress token, and does nothing else.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={"type": "object", "required": ["progress", "total"], "properties": {
        "progress": {"type": "array", "items": {"type": "integer"},
                     "description": "The progress values, in order (sent to a caller that gave a token)."},
        "total": {"type": "integer", "description": "The total they are of."}}},
)
TOOLS: tuple[types.Tool, ...] = (WITH_PROGRESS,)


async def with_progress(ctx: ServerRequestContext[Any]) -> types.CallToolResult:
    """``test_tool_with_progress``: 0, 50 and 100 of 100 (told only to a caller that asked)."""
    for n, done in enumerate(STEPS):
        if n:
            await anyio.sleep(PAUSE)
        await ctx.session.report_progress(float(done), float(TOTAL))
    text = f"test_tool_with_progress: progress {', '.join(map(str, STEPS))} of {TOTAL}"
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content={"progress": list(STEPS), "total": TOTAL})


#: The suite's tools by name, and what each does.
HANDLERS = {WITH_PROGRESS.name: with_progress}
