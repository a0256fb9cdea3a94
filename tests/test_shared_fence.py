"""A runner frozen (SIGSTOP) past its lease while its request was on its way, and the call taken
back and sent by another runner meanwhile: what reaches the store when the frozen one wakes.

The runners talk to the store through a TLS front door (``frontdoor.py``) that holds a runner's
request where a network can: before its connection is ready, or after it was written and before
the store reads it.  The store ignores Idempotency-Key where a late request must not count on it.
"""

from __future__ import annotations

import dataclasses
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from frontdoor import FrontDoor
from helpers import Store
from sharedkit import finish, query, start_runner, wait_for, write_pool

from pooler.journal.postgres.schema import upgrade

pytestmark = pytest.mark.postgres
#: The runner that is frozen: a short lease, so that it expires while it is stopped.
FROZEN = ("--insecure", "--lease", "1.5", "--timeout", "1")
TAKER = ("--insecure", "--lease", "30", "--timeout", "5")
LOST = re.compile(r"pooler: (the lease of runner \S+ expired and its calls were taken back by another "
                  r"runner|runner \S+ was not heard from for longer than its lease \(1\.5 s\): its calls "
                  r"may have been taken back|the lease of runner \S+ on task t ran out before the call "
                  r"could leave)\n")


@pytest.fixture
def url(pg_url: str) -> str:
    upgrade(pg_url)
    return pg_url


@pytest.fixture
def door_of(tmp_path: Path) -> Iterator[Any]:
    doors: list[FrontDoor] = []

    def make(store: Store) -> tuple[FrontDoor, Store]:
        door = FrontDoor(store.url, tmp_path / "tls")
        doors.append(door)
        return door, dataclasses.replace(store, url=door.url)

    yield make
    for door in doors:
        door.close()


def one_call(folder: Path) -> Path:
    step = "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 1}, key: once}"
    return write_pool(folder, ["pool:", step])


def runs(store: Store) -> int:
    return sum(op["command"] == "CmdEcho" for op in store.ops())


def sent_by(url: str, pid: int) -> bool:
    return bool(query(url, "SELECT 1 FROM work WHERE task = 't' AND state = 'sent' AND runner LIKE %s",
                      (f"%-{pid}-%",)))


def take_back(pool: Path, via: Store, url: str, tmp_path: Path) -> None:
    """Another runner takes the call back once the frozen one's lease expired, and sends it."""
    code, answer, err = finish(start_runner(pool, via, url, "t", tmp_path / "out-b", *TAKER))
    assert code == 0, err
    assert answer is not None
    assert (answer["status"], answer["succeeded"]) == ("completed", 1)
    assert [i["action"] for i in answer["in_doubt"]] == ["retried"]


@pytest.mark.process
def test_a_runner_frozen_while_it_connects_sends_nothing_once_its_call_was_taken_back(
        store_factory: Any, door_of: Any, url: str, tmp_path: Path) -> None:
    store = store_factory("--no-idempotency")
    door, via = door_of(store)
    pool = one_call(tmp_path / "pool")
    # The runner's call is marked sent and its connection waits for the TLS handshake: it checked
    # its lease before connecting, and freezes before a byte of the request is written.
    door.hold("handshake")
    frozen = start_runner(pool, via, url, "t", tmp_path / "out-a", *FROZEN)
    assert door.holding.wait(60)
    wait_for(lambda: sent_by(url, frozen.pid))
    frozen.send_signal(signal.SIGSTOP)
    take_back(pool, via, url, tmp_path)
    door.release.set()
    frozen.send_signal(signal.SIGCONT)
    code, _, err = finish(frozen)
    assert code == 1
    assert LOST.search(err), err
    # Its lease is checked again once the connection is ready, as the last thing before the
    # request's bytes: the call ran once, sent by the runner that took it back.
    assert runs(store) == 1
    (lease,) = door.leases()
    assert f"-{frozen.pid}-" not in lease


@pytest.mark.process
@pytest.mark.parametrize(("store_args", "ran"), [
    pytest.param(("--fence-leases", "--no-idempotency"), 1, id="fencing-store"),
    pytest.param((), 1, id="key-honouring-store"),
    pytest.param(("--no-idempotency",), 2, id="store-that-ignores-keys-and-leases"),
])
def test_a_late_request_runs_once_at_a_store_that_fences_leases_or_keeps_keys(
        store_factory: Any, door_of: Any, url: str, tmp_path: Path, store_args: tuple[str, ...],
        ran: int) -> None:
    store = store_factory(*store_args)
    door, via = door_of(store)
    pool = one_call(tmp_path / "pool")
    # The request is written, then held on its way; its runner freezes past its lease.
    door.hold("request")
    frozen = start_runner(pool, via, url, "t", tmp_path / "out-a", *FROZEN)
    assert door.holding.wait(60)
    frozen.send_signal(signal.SIGSTOP)
    take_back(pool, via, url, tmp_path)
    # The late request reaches the store after the call was sent again under a newer lease.
    door.release.set()
    wait_for(lambda: len(door.leases()) == 2)
    frozen.send_signal(signal.SIGCONT)
    code, _, err = finish(frozen)
    assert code == 1
    assert LOST.search(err), err
    late, again = door.leases()
    (late_runner, late_epoch), (runner, epoch) = (x.rsplit(":", 1) for x in (late, again))
    assert f"-{frozen.pid}-" in late_runner
    assert runner != late_runner
    assert int(epoch) > int(late_epoch)
    assert runs(store) == ran
