"""pooler: run pools of store AI tool calls, checked before anything is sent and safe to rerun."""

__version__ = "0.1.0"
