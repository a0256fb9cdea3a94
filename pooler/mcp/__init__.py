"""The parts of ``pooler mcp``: the tools' declarations, their arguments, and what they do.

The server itself (the stdio transport and the command line) is ``pooler.mcp.server``.
"""
