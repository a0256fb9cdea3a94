"""Shared fixtures: a real reference store on a free port (helpers live in helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, start_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = start_store(tmp_path)
    yield s
    s.stop()


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Store] = []

    def make(*args: str, **kw: Any) -> Store:
        s = start_store(tmp_path, *args, **kw)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def secret_store(store_factory: Any, request: pytest.FixtureRequest) -> Store:
    """A store whose token is the test module's ``TOKEN``."""
    found: Store = store_factory("--token", request.module.TOKEN)
    return found


@pytest.fixture
def token_file(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The test module's ``TOKEN`` in an owner-only file."""
    path = tmp_path / "token"
    path.write_text(request.module.TOKEN + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path
