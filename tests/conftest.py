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


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One real PostgreSQL for the session; skipped (or failed, with POOLER_REQUIRE_POSTGRES=1)
    where its server binaries are not installed."""
    import os  # noqa: PLC0415

    from pg_server import REQUIRE, start_server  # noqa: PLC0415

    try:
        server = start_server()
    except RuntimeError as exc:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{exc}; {REQUIRE}=1 asks for these tests to run")
        pytest.skip(f"PostgreSQL tests skipped: {exc}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: Any, request: pytest.FixtureRequest) -> str:
    """A fresh database of its own for one test."""
    import re  # noqa: PLC0415
    import secrets  # noqa: PLC0415

    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40] + "_" + secrets.token_hex(3)
    url: str = pg_server.new_database(name)
    return url
