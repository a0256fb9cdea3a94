"""Injected faults of /tool_run, each at rate 1.0; CmdOps is never faulted, so ops stay readable."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from helpers import STORE_TOKEN, Store, start_store
from storekit import TEST, unique

from pooler.store.cli import main as store_main

KINDS = ("refuse", "reset", "slow", "garbage", "truncate", "crash", "huge")
HEADERS = {"Authorization": f"Bearer {STORE_TOKEN}"}


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Store]]:
    """A store per kind (and a seeded one), each on a thread of its own."""
    specs = {k: ("--fault", f"{k}:1.0", "--slow-ms", "2000") for k in KINDS}
    specs["seeded"] = ("--fault", "garbage:0.5", "--seed", "7")
    stores: dict[str, Store] = {}

    def start(name: str) -> None:
        stores[name] = start_store(tmp_path_factory.mktemp(name), *specs[name])

    threads = [threading.Thread(target=start, args=(n,)) for n in specs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    yield stores
    for s in stores.values():
        s.stop()


def _echo(
    store: Store, marker: str, timeout: float | tuple[float, float] = 10, stream: bool = False
) -> requests.Response:
    return requests.post(
        f"{store.url}/tool_run",
        json={"unit": TEST, "command": "CmdEcho", "params": {"m": marker}},
        headers=HEADERS,
        timeout=timeout,
        stream=stream,
    )


def _ran(store: Store, marker: str) -> int:
    return sum(o["params"].get("m") == marker for o in store.ops())


def test_refuse_closes_before_anything_runs(faulty: dict[str, Store]) -> None:
    store, marker = faulty["refuse"], unique("m")
    with pytest.raises(requests.ConnectionError):
        _echo(store, marker)
    assert _ran(store, marker) == 0


def test_reset_runs_the_command_and_gives_no_answer(faulty: dict[str, Store]) -> None:
    store, marker = faulty["reset"], unique("m")
    with pytest.raises(requests.ConnectionError):
        _echo(store, marker)
    assert _ran(store, marker) == 1


def test_slow_answers_after_the_clients_timeout(faulty: dict[str, Store]) -> None:
    store, marker = faulty["slow"], unique("m")
    with pytest.raises(requests.ReadTimeout):
        _echo(store, marker, timeout=(5, 0.5))
    assert _ran(store, marker) == 1
    late = _echo(store, marker, timeout=10)
    assert late.json()["data"]["detail"] == {"m": marker}


def test_garbage_is_200_and_not_json(faulty: dict[str, Store]) -> None:
    store, marker = faulty["garbage"], unique("m")
    resp = _echo(store, marker)
    assert resp.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(resp.text)
    assert _ran(store, marker) == 1


def test_truncate_cuts_the_answer_short(faulty: dict[str, Store]) -> None:
    store, marker = faulty["truncate"], unique("m")
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        _echo(store, marker)
    assert _ran(store, marker) == 1


def test_crash_is_500_text_and_runs_nothing(faulty: dict[str, Store]) -> None:
    store, marker = faulty["crash"], unique("m")
    resp = _echo(store, marker)
    assert resp.status_code == 500
    assert resp.headers["Content-Type"].startswith("text/plain")
    assert resp.text == "MELBIS_AGENT_TEST\\CmdEcho failed: the store broke down (injected fault: crash)"
    assert _ran(store, marker) == 0


def test_huge_is_over_50_mb(faulty: dict[str, Store]) -> None:
    store, marker = faulty["huge"], unique("m")
    size, head, tail = 0, b"", b""
    with _echo(store, marker, timeout=60, stream=True) as resp:
        assert resp.status_code == 200
        for chunk in resp.iter_content(1 << 20):
            head = head or chunk[:20]
            tail = (tail + chunk)[-4096:]
            size += len(chunk)
    assert size >= 50 << 20
    assert head.startswith(b'{"padding":"xxxx')
    assert f'"detail":{{"m":"{marker}"}}'.encode() in tail
    assert _ran(store, marker) == 1


def test_tool_list_is_never_faulted(faulty: dict[str, Store]) -> None:
    resp = requests.post(f"{faulty['refuse'].url}/tool_list", json={}, headers=HEADERS, timeout=10)
    assert resp.json()["data"]["result"] is True


def test_the_seed_makes_the_faults_reproducible(faulty: dict[str, Store]) -> None:
    """One draw of random.Random(seed) per request; the rates lie end to end from 0."""
    store = faulty["seeded"]
    got = []
    for n in range(24):
        resp = _echo(store, "seeded")
        try:
            resp.json()
        except json.JSONDecodeError:
            got.append(True)
        else:
            got.append(False)
        if n % 5 == 0:
            store.ops()  # CmdOps draws no number: reading ops does not shift the pattern
    rng = random.Random(7)
    assert got == [rng.random() < 0.5 for _ in range(24)]
    assert 0 < sum(got) < 24
    assert _ran(store, "seeded") == 24


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        (
            ["boom:1"],
            ("pooler store: --fault boom:1: the kind is one of refuse, reset, slow, garbage, truncate, "
            "crash, huge"),
        ),
        (["reset:2"], "pooler store: --fault reset:2: write KIND:RATE with RATE from 0 to 1, like reset:0.1"),
        (["reset"], "pooler store: --fault reset: write KIND:RATE with RATE from 0 to 1, like reset:0.1"),
        (
            ["reset:0.6", "slow:0.6"],
            "pooler store: --fault: the rates add up to more than 1 - a request suffers one fault at most",
        ),
    ],
)
def test_a_bad_fault_option_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], faults: list[str], message: str
) -> None:
    args = ["serve", "--db", str(tmp_path / "db"), "--root", str(tmp_path / "root")]
    for fault in faults:
        args += ["--fault", fault]
    assert store_main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == message
    assert not (tmp_path / "db").exists()  # refused before anything was opened
