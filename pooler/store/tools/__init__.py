"""The store's own tools: for each, a module of command functions and its JSON declaration."""
