"""``pooler lsp``: the pool file's language server (check's problems as you type, completion, hover)."""
