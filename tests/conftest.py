"""Shared fixtures: a real reference store on a free port (helpers live in helpers.py), and the
marks that say which tests start processes or need PostgreSQL or a browser."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, start_store

#: The pooler processes the running test has started (an audit hook sees every subprocess.Popen).
_STARTED: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "subprocess.Popen":
        return
    argv = [str(a) for a in (args[1] or [args[0]])]
    # `python -m pooler ...`, or the installed `pooler` script; other programs (PostgreSQL,
    # Chromium, tmux) are the services a test talks to, not pooler run as a process.
    if "pooler" in argv[1:3] or Path(argv[0]).name == "pooler":
        _STARTED.append(" ".join(argv[:5]))


sys.addaudithook(_audit)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded (the test modules, pooler's, their fixtures and marks) lives until the
    session ends: kept out of the garbage collector's scans, each full one of which walked all of it
    again."""
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on PostgreSQL or in Chromium is marked so by the fixture or module it uses, so
    ``-m 'not postgres'`` and ``make test-fast`` can leave it out."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "pg_server" in names or "pg_url" in names:
            item.add_marker(pytest.mark.postgres)
        if item.module is not None and item.module.__name__ == "test_report_browser":
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def _state_of_its_own(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test keeps pooler's state (the default journal, the run locks) and config in folders of
    its own: tests side by side never share a lock, and none writes to the home folder."""
    base = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))


@pytest.fixture(autouse=True)
def _processes_are_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that starts a process says so with ``@pytest.mark.process``: the in-process CLI and
    the store on a thread are the default, and the mark is how the rest are counted and chosen."""
    _STARTED.clear()
    yield
    started, marked = list(_STARTED), request.node.get_closest_marker("process") is not None
    _STARTED.clear()
    if started and not marked:
        pytest.fail(f"this test starts processes ({started[0]}...) but is not marked "
                    "@pytest.mark.process", pytrace=False)


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
    server.close()


@pytest.fixture
def pg_url(pg_server: Any, request: pytest.FixtureRequest) -> str:
    """A fresh database of its own for one test."""
    import re  # noqa: PLC0415
    import secrets  # noqa: PLC0415

    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40] + "_" + secrets.token_hex(3)
    url: str = pg_server.new_database(name)
    return url
