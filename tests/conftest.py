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

