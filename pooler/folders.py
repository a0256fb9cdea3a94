"""The operator's own folders, where pooler keeps what outlives a run when no option names a place:
the state (the default journal, the run locks) and the config (``stores.yaml``).

They follow the XDG base directories, read from the environment a command was given (``main``'s
``environ``), never from the process's alone: a caller that gives ``HOME`` or ``XDG_STATE_HOME``
gets its files there, and nothing lands in the home folder of whoever runs the process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def _base(environ: Mapping[str, str] | None, variable: str, fallback: str) -> Path:
    env = os.environ if environ is None else environ
    given = env.get(variable)
    if given:
        return Path(given) / "pooler"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / fallback / "pooler"


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/pooler``, else ``~/.local/state/pooler``."""
    return _base(environ, "XDG_STATE_HOME", ".local/state")


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/pooler``, else ``~/.config/pooler``."""
    return _base(environ, "XDG_CONFIG_HOME", ".config")
