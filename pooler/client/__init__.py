"""The tool_run client: HTTP, answer scanning, call arguments, masking."""
