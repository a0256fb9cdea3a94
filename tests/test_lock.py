"""One run at a time per pool file: the lock itself, and two real overlapping runs."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, Store, environment, pooler, wait_for_ops

from pooler.errors import LockedError
from pooler.run.lock import PoolLock, lock_dir, lock_path


def test_second_lock_on_the_same_pool_is_refused_with_the_holder(tmp_path: Path) -> None:
    pool = tmp_path / "p.yaml"
    pool.write_text("pool: []\n")
    first = PoolLock(pool, tmp_path / "locks")
    first.acquire()
    try:
        with pytest.raises(LockedError) as caught:
            PoolLock(pool, tmp_path / "locks").acquire()
        assert re.fullmatch(
            rf"another run of {re.escape(str(pool))} is running \(pid {os.getpid()}, started "
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d\); this run sent nothing\.",
            caught.value.message,
        )
    finally:
        first.release()
    again = PoolLock(pool, tmp_path / "locks")
    again.acquire()
    assert again.held
    again.release()
    again.release()  # twice is harmless
    assert not again.held


def test_a_run_refused_as_the_holder_takes_the_lock_waits_for_the_holders_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The holder between its flock and its write: the refused run reads an empty file, and tells
    # the holder once its line is there, not "pid unknown".
    pool = tmp_path / "p.yaml"
    pool.write_text("pool: []\n")
    path = lock_path(pool, tmp_path / "locks")
    path.parent.mkdir(parents=True)
    held = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)
    waits: list[float] = []

    def holder_writes(seconds: float) -> None:
        waits.append(seconds)
        os.pwrite(held, b"pid 4242\nstarted 2026-12-06T18:00:00+00:00\n", 0)

    monkeypatch.setattr("pooler.run.lock.time.sleep", holder_writes)
    with pytest.raises(LockedError) as caught:
        PoolLock(pool, tmp_path / "locks").acquire()
    assert "(pid 4242, started 2026-12-06T18:00:00+00:00)" in caught.value.message
    assert len(waits) == 1
    os.close(held)


def test_locks_of_two_pools_do_not_meet(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    with PoolLock(a, tmp_path / "locks"), PoolLock(b, tmp_path / "locks") as second:
        assert second.held


def test_lock_file_and_folder_are_owner_only_and_named_by_sha1(tmp_path: Path) -> None:
    pool = tmp_path / "p.yaml"
    folder = tmp_path / "state" / "locks"
    with PoolLock(pool, folder) as lock:
        assert lock.path == lock_path(pool, folder)
        assert re.fullmatch(r"[0-9a-f]{40}\.lock", lock.path.name)
        assert stat.S_IMODE(lock.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert f"pid {os.getpid()}" in lock.path.read_text()


def test_the_same_file_by_another_path_is_the_same_lock(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    pool = tmp_path / "p.yaml"
    roundabout = tmp_path / "sub" / ".." / "p.yaml"
    assert lock_path(pool, tmp_path) == lock_path(roundabout, tmp_path)


def test_lock_dir_is_in_the_state_folder(tmp_path: Path) -> None:
    assert lock_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "pooler" / "locks"


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    pool = tmp_path / "p.yaml"
    code = ("import sys, pathlib; from pooler.run.lock import PoolLock;"
            f"PoolLock(pathlib.Path({str(pool)!r}), pathlib.Path({str(tmp_path)!r})).acquire();"
            "print('held', flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    with pytest.raises(LockedError, match=rf"\(pid {child.pid}, "):
        PoolLock(pool, tmp_path).acquire()
    child.kill()
    child.wait()
    with PoolLock(pool, tmp_path) as lock:
        assert lock.held


def wait_for_lock_holder(path: Path, pid: int, proc: subprocess.Popen[str], deadline: float) -> None:
    """Poll the lock file until the first run has written its pid into it."""
    while time.monotonic() < deadline:
        if path.is_file() and f"pid {pid}\n" in path.read_text():
            return
        assert proc.poll() is None, f"the first run ended early: {proc.communicate()}"
        time.sleep(0.02)
    raise AssertionError("the first run never took its lock")


def slow_pool(path: Path, calls: int = 40) -> Path:
    """``calls`` echoes of 300 ms each (against a store with --latency-ms 300)."""
    path.write_text(
        "pool:\n"
        + "".join(f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {{n: {n}}}}}\n"
                  for n in range(calls))
    )
    return path


def start_first(pool: Path, store: Store, state: Path, *common: str) -> subprocess.Popen[str]:
    """A run that holds its locks (in the state folder ``state``) until it is stopped."""
    env = environment()
    env.update(POOLER_TOKEN=store.token, XDG_STATE_HOME=str(state))
    first = subprocess.Popen([sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url,
                              *common, "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    wait_for_lock_holder(lock_path(pool, lock_dir({"XDG_STATE_HOME": str(state)})), first.pid, first,
                         time.monotonic() + 30)
    # Sending by now: a signal before its first call would stop it before it has anything to say.
    wait_for_ops(store, 1, first)
    return first


@pytest.mark.process
def test_two_overlapping_runs_of_one_pool(tmp_path: Path, store_factory: object) -> None:
    store: Store = store_factory("--latency-ms", "300")  # type: ignore[operator]
    # 40 calls of 300 ms: the first run is still going when the second one starts.
    pool = slow_pool(tmp_path / "slow.yaml")
    journal = tmp_path / "journal.sqlite"
    state = tmp_path / "state"
    common = ["--store", store.url, "--journal", str(journal), "--out", str(tmp_path / "out")]
    first = start_first(pool, store, state, *common[2:])
    try:
        second = pooler("run", str(pool), *common, "--json",
                        env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(state)})
        assert first.poll() is None, "the first run ended before the second one tried the lock"
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 3, second.stderr
    # --json: the refusal is a document too.
    locked = json.loads(second.stdout)
    assert (locked["result"], locked["status"], locked["exit"]) == (False, "locked", 3)
    assert locked["exit_meaning"] == "another run of the pool file holds its lock; nothing was sent"
    assert locked["problems"][0]["message"].startswith(f"another run of {pool} is running (pid {first.pid}")
    assert re.fullmatch(
        rf"pooler: another run of {re.escape(str(pool))} is running \(pid {first.pid}, started \S+\); "
        r"this run sent nothing\.\n",
        second.stderr,
    )
    assert first.returncode == 130, err
    done = json.loads(out)["succeeded"]
    # Every call the store carried out was the first run's.
    assert [op["params"] for op in store.ops()] == [{"n": n} for n in range(done)]
    # The lock is free again once the first run has ended.
    with PoolLock(pool, lock_dir({"XDG_STATE_HOME": str(state)})) as lock:
        assert lock.held


@pytest.mark.process
@pytest.mark.parametrize("shared", ["pool", "out"])
def test_the_lock_holds_whatever_journal_each_run_keeps(tmp_path: Path, store_factory: object,
                                                        shared: str) -> None:
    """Two runs of one pool file with journals of their own, or two pools writing one --out: the
    second sends nothing (its journal is no way around the lock)."""
    store: Store = store_factory("--latency-ms", "300")  # type: ignore[operator]
    pool = slow_pool(tmp_path / "slow.yaml")
    other = pool if shared == "pool" else slow_pool(tmp_path / "other.yaml", 1)
    state = tmp_path / "state"
    first = start_first(pool, store, state, "--journal", str(tmp_path / "a" / "journal.sqlite"),
                        "--out", str(tmp_path / "out"))
    try:
        out = tmp_path / ("out" if shared == "out" else "out-b")
        second = pooler("run", str(other), "--store", store.url, "--journal",
                        str(tmp_path / "b" / "journal.sqlite"), "--out", str(out), "--json",
                        env={"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(state)})
        assert first.poll() is None, "the first run ended before the second one tried the lock"
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 3, second.stderr
    holder = rf"\(pid {first.pid}, started \S+\)"
    if shared == "pool":
        expected = (rf"pooler: another run of {re.escape(str(pool))} is running {holder}; "
                    r"this run sent nothing\.\n")
    else:
        expected = (rf"pooler: another run writes its tables to --out {re.escape(str(out))} {holder}; this "
                    r"run sent nothing - give it an --out of its own, or wait for that run to end\.\n")
    assert re.fullmatch(expected, second.stderr)
    assert not (tmp_path / "b" / "journal.sqlite").exists()
    assert len([op for op in store.ops() if op["params"] == {"n": 0}]) == 1


def test_a_run_the_lock_refuses_is_written_to_its_log_file_after_the_nights_before(
        tmp_path: Path, store: Store) -> None:
    pool = tmp_path / "nightly.yaml"
    pool.write_text("pool:\n  - {unit: MELBIS_AGENT_TEST, command: CmdEcho}\n")
    state, log = tmp_path / "state", tmp_path / "cron.log"
    env = {"POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(state)}
    common = ["--store", store.url, "--journal", str(tmp_path / "journal.sqlite"),
              "--out", str(tmp_path / "out"), "--log", str(log)]
    assert pooler("run", str(pool), *common, env=env).returncode == 0
    night = log.read_text()
    # The test holds the pool's lock, as a night still running would.
    with PoolLock(pool, lock_dir({"XDG_STATE_HOME": str(state)})):
        refused = pooler("run", str(pool), *common, env=env)
    assert refused.returncode == 3, refused.stderr
    told = refused.stderr.removesuffix("\n")
    assert told.startswith(f"pooler: another run of {pool} is running (pid {os.getpid()}, started ")
    text = log.read_text()
    assert text.startswith(night)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d " + re.escape(told) + r"\n", text[len(night):])
    assert [op["command"] for op in store.ops()] == ["CmdEcho"]
