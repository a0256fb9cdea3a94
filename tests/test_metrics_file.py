"""``pooler run --metrics-file``: the run's metrics in Prometheus' text format, as node_exporter's
textfile collector reads them, checked with Prometheus' own parser and with the real node_exporter.

node_exporter is Debian's ``prometheus-node-exporter``; where it is missing its test skips saying
so, and fails instead under ``POOLER_REQUIRE_NODE_EXPORTER=1`` (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import ROOT, STORE_TOKEN, Store, busy_pool, pooler, start_store
from poolkit import Recorder, make_pool, run, step
from promcheck import metrics_files_pass_promtool, promtool, promtool_problems  # noqa: F401 - autouse
from prometheus_client.parser import text_string_to_metric_families

from pooler.report.metrics import MetricsReporter
from pooler.run.events import FanOut

TEST = "MELBIS_AGENT_TEST"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
#: The counters of a metrics file, as their samples, their HELP and their TYPE name them.
COUNTERS = ("pooler_calls_total", "pooler_rows_total", "pooler_calls_resent_total",
            "pooler_store_busy_answers_total", "pooler_breaker_trips_total")
REQUIRE = "POOLER_REQUIRE_NODE_EXPORTER"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples_of(text: str) -> Samples:
    """Every sample of an exposition text, by name and labels, read by Prometheus' parser."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def write_pool(folder: Path, steps: list[dict[str, Any]], name: str = "nightly.json", **options: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps({**options, "pool": steps}), encoding="utf-8")
    return path


def mixed_pool(folder: Path) -> Path:
    """A completed call, a failed one, one in doubt (an answer without result), and a step over
    three rows."""
    (folder / "rows.csv").write_text("n\n1\n2\n3\n", encoding="utf-8")
    return write_pool(folder, [
        {"name": "ok", "unit": TEST, "command": "CmdEcho", "params": {"n": 0}},
        {"name": "refused", "unit": TEST, "command": "CmdFail"},
        {"name": "lost", "unit": TEST, "command": "CmdNoResult"},
        {"name": "each", "unit": TEST, "command": "CmdEcho", "params": {"n": "${row.n}"},
         "for_each": {"file": "rows.csv"}},
    ], stop_on_error=False)


def run_cli(store: Store, tmp_path: Path, pool: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": STORE_TOKEN})


def test_the_metrics_file_of_a_run_counts_its_calls_by_status_in_prometheus_text(
        store: Store, tmp_path: Path) -> None:
    metrics = tmp_path / "textfile" / "nightly.prom"
    metrics.parent.mkdir()
    before = time.time()
    done = run_cli(store, tmp_path, mixed_pool(tmp_path), "--metrics-file", str(metrics))
    after = time.time()
    assert done.returncode == 1, done.stderr
    text = metrics.read_text(encoding="utf-8")
    got = samples_of(text)
    port = store.url.rsplit(":", 1)[1]
    labels = {"pool": "nightly.json", "store": f"127.0.0.1:{port}"}
    # Two labels only, the token nowhere.
    assert all(dict(ls).keys() - {"status", "le"} == labels.keys() for _, ls in got)
    assert all(dict(ls)["store"] == labels["store"] and dict(ls)["pool"] == "nightly.json" for _, ls in got)
    assert STORE_TOKEN not in text
    for status, count in {"completed": 4, "failed": 1, "in_doubt": 1, "skipped": 0, "not_run": 0}.items():
        assert value(got, "pooler_calls_total", status=status) == count
    assert value(got, "pooler_rows_total", status="completed") == 3
    assert value(got, "pooler_calls_in_doubt") == 1
    assert value(got, "pooler_calls_resent_total") == 0
    # Nothing held the run back.
    assert value(got, "pooler_calls_throttled_seconds") == 0
    assert value(got, "pooler_store_busy_answers_total") == 0
    assert value(got, "pooler_breaker_trips_total") == 0
    assert value(got, "pooler_calls_planned") == 6
    assert value(got, "pooler_run_in_progress") == 0
    assert value(got, "pooler_run_success") == 0
    start = value(got, "pooler_run_start_timestamp_seconds")
    end = value(got, "pooler_run_end_timestamp_seconds")
    assert before <= start <= end <= after
    assert value(got, "pooler_run_duration_seconds") == pytest.approx(end - start, abs=1e-6)
    # Never a success: an alert on "no success for 26 hours" fires at once.
    assert value(got, "pooler_last_success_timestamp_seconds") == 0
    # The store answered all six calls: the histogram counts them, cumulative up to +Inf.
    assert value(got, "pooler_store_answer_seconds_count") == 6
    assert value(got, "pooler_store_answer_seconds_bucket", le="+Inf") == 6
    assert value(got, "pooler_store_answer_seconds_bucket", le="0.005") <= value(
        got, "pooler_store_answer_seconds_bucket", le="60.0")
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert types["pooler_calls"] == "counter"
    assert types["pooler_store_answer_seconds"] == "histogram"
    assert types["pooler_run_start_timestamp_seconds"] == "gauge"
    # Written like every file pooler writes: owner-only, and nothing left beside it.
    assert stat.S_IMODE(metrics.stat().st_mode) == 0o600
    assert sorted(p.name for p in metrics.parent.iterdir()) == ["nightly.prom"]


def test_the_metrics_file_tells_what_flow_control_did(tmp_path: Path) -> None:
    busy_store = start_store(tmp_path, "--rate-limit", "10")
    try:
        pool = busy_pool(tmp_path, 30)
        metrics = tmp_path / "busy.prom"
        done = run_cli(busy_store, tmp_path, pool, "--metrics-file", str(metrics), "--json")
        assert done.returncode == 0, done.stderr
        flow = json.loads(done.stdout)["flow"]
        got = samples_of(metrics.read_text(encoding="utf-8"))
        assert value(got, "pooler_store_busy_answers_total") == flow["busy"] > 0
        assert value(got, "pooler_calls_throttled_seconds") == flow["throttled_ms"] / 1000 > 0
        assert value(got, "pooler_breaker_trips_total") == 0
    finally:
        busy_store.stop()


def test_a_run_that_fails_keeps_the_last_success_of_the_previous_file(store: Store, tmp_path: Path) -> None:
    metrics = tmp_path / "nightly.prom"
    good = write_pool(tmp_path, [{"unit": TEST, "command": "CmdEcho"}], name="good.json")
    assert run_cli(store, tmp_path, good, "--metrics-file", str(metrics)).returncode == 0
    first = samples_of(metrics.read_text(encoding="utf-8"))
    success = value(first, "pooler_last_success_timestamp_seconds")
    assert success == value(first, "pooler_run_end_timestamp_seconds")
    assert value(first, "pooler_run_success") == 1
    metrics.chmod(0o640)
    bad = write_pool(tmp_path, [{"unit": TEST, "command": "CmdFail"}], name="good.json")
    assert run_cli(store, tmp_path, bad, "--metrics-file", str(metrics)).returncode == 1
    second = samples_of(metrics.read_text(encoding="utf-8"))
    assert value(second, "pooler_last_success_timestamp_seconds") == success
    assert value(second, "pooler_run_success") == 0
    assert value(second, "pooler_run_end_timestamp_seconds") > success
    # An operator who let node_exporter's group read the file keeps that.
    assert stat.S_IMODE(metrics.stat().st_mode) == 0o640


def test_the_metrics_file_is_written_while_the_run_goes(store: Store, tmp_path: Path) -> None:
    metrics = tmp_path / "slow.prom"
    pool = make_pool(tmp_path, [step(TEST, "CmdEcho"), step(TEST, "CmdSleep", {"ms": 800})])
    seen: list[Samples] = []
    reporter = MetricsReporter(metrics, pool="slow", store="s", interval=0.05)
    with reporter:
        thread = threading.Thread(target=run, args=(pool, store, tmp_path / "out"),
                                  kwargs={"reporter": reporter})
        thread.start()
        # Until a file written while the run goes counts the first call done.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and thread.is_alive():
            if metrics.exists():
                got = samples_of(metrics.read_text(encoding="utf-8"))
                if value(got, "pooler_calls_total", status="completed") == 1:
                    seen.append(got)
                    break
            time.sleep(0.01)
        thread.join()
    assert seen, "no file was written while the run went"
    assert value(seen[0], "pooler_run_in_progress") == 1
    assert not any(n == "pooler_run_end_timestamp_seconds" for n, _ in seen[0])
    final = samples_of(metrics.read_text(encoding="utf-8"))
    assert value(final, "pooler_run_in_progress") == 0
    assert value(final, "pooler_calls_total", status="completed") == 2
    assert value(final, "pooler_run_success") == 1


def test_a_metrics_file_in_a_folder_that_does_not_exist_is_refused_before_anything_is_sent(
        store: Store, tmp_path: Path) -> None:
    pool = write_pool(tmp_path, [{"unit": TEST, "command": "CmdEcho"}])
    where = tmp_path / "nowhere" / "n.prom"
    done = run_cli(store, tmp_path, pool, "--metrics-file", str(where))
    assert done.returncode == 2
    assert done.stderr == (
        f"pooler: --metrics-file {where}: the folder {where.parent} does not exist - create it "
        "(node_exporter's --collector.textfile.directory), or name a file in a folder that exists\n"
        "pooler: refused before the first step; nothing was sent.\n")
    assert "Traceback" not in done.stderr
    assert store.ops() == []


def test_a_metrics_file_not_named_prom_is_refused_since_node_exporter_would_not_read_it(
        store: Store, tmp_path: Path) -> None:
    pool = write_pool(tmp_path, [{"unit": TEST, "command": "CmdEcho"}])
    done = run_cli(store, tmp_path, pool, "--metrics-file", str(tmp_path / "n.txt"))
    assert done.returncode == 2
    assert (f"--metrics-file {tmp_path / 'n.txt'}: node_exporter's textfile collector reads only files "
            "ending in .prom - name it like n.prom") in done.stderr
    assert store.ops() == []


def test_the_store_label_is_the_configured_name_of_the_store(store: Store, tmp_path: Path) -> None:
    config = tmp_path / "stores.yaml"
    config.write_text(f"stores:\n  shop-eu:\n    url: {store.url}\n", encoding="utf-8")
    metrics = tmp_path / "n.prom"
    pool = write_pool(tmp_path, [{"unit": TEST, "command": "CmdEcho"}])
    done = pooler("run", str(pool), "--store", "shop-eu", "--config", str(config), "--out",
                  str(tmp_path / "out"), "--journal", str(tmp_path / "j.sqlite"), "--metrics-file",
                  str(metrics), env={"POOLER_TOKEN": STORE_TOKEN})
    assert done.returncode == 0, done.stderr
    got = samples_of(metrics.read_text(encoding="utf-8"))
    assert {dict(ls)["store"] for _, ls in got} == {"shop-eu"}


# A killed run


@pytest.mark.process
def test_a_killed_run_leaves_the_previous_metrics_file_whole(store: Store, tmp_path: Path) -> None:
    metrics = tmp_path / "nightly.prom"
    good = write_pool(tmp_path, [{"unit": TEST, "command": "CmdEcho"}])
    assert run_cli(store, tmp_path, good, "--metrics-file", str(metrics)).returncode == 0
    success = value(samples_of(metrics.read_text(encoding="utf-8")), "pooler_last_success_timestamp_seconds")
    slow = write_pool(tmp_path, [{"unit": TEST, "command": "CmdSleep", "params": {"ms": 60000}}],
                      name="nightly.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("POOLER_")}
    env["POOLER_TOKEN"] = STORE_TOKEN
    proc = subprocess.Popen([sys.executable, "-m", "pooler", "run", str(slow), "--store", store.url,
                             "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "journal.sqlite"),
                             "--metrics-file", str(metrics)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Until the run has rewritten the file as it starts; its one call is then under way.
        deadline = time.monotonic() + 60
        while value(samples_of(metrics.read_text(encoding="utf-8")), "pooler_run_in_progress") != 1:
            assert proc.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    got = samples_of(metrics.read_text(encoding="utf-8"))
    # Whole (every family, every status), the run shown as still going, the last success kept.
    assert value(got, "pooler_run_in_progress") == 1
    assert value(got, "pooler_last_success_timestamp_seconds") == success
    assert len([n for n, _ in got if n == "pooler_calls_total"]) == 5
    assert value(got, "pooler_store_answer_seconds_bucket", le="+Inf") == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".prom")) == ["nightly.prom"]


# The real node_exporter


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def node_exporter(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """node_exporter with only its textfile collector, on a free port of 127.0.0.1: its /metrics URL
    and its textfile folder."""
    exe = shutil.which("prometheus-node-exporter") or shutil.which(NODE_EXPORTER)
    if exe is None:
        why = ("node_exporter is not installed (apt-get install prometheus-node-exporter): the test against "
               "its textfile collector did not run")
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1: {why}")
        pytest.skip(why)
    folder = tmp_path / "textfile"
    folder.mkdir()
    port = free_port()
    proc = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                             "--collector.textfile", f"--collector.textfile.directory={folder}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 30
    try:
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if requests.get(url, timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "node_exporter never answered"
            time.sleep(0.05)
        yield url, folder
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_node_exporter_serves_the_metrics_of_a_run_with_completed_failed_and_in_doubt_calls(
        store: Store, tmp_path: Path, node_exporter: tuple[str, Path]) -> None:
    url, folder = node_exporter
    done = run_cli(store, tmp_path, mixed_pool(tmp_path), "--metrics-file", str(folder / "nightly.prom"))
    assert done.returncode == 1, done.stderr
    scraped = requests.get(url, timeout=10).text
    got = samples_of(scraped)
    assert value(got, "node_textfile_scrape_error") == 0
    assert value(got, "pooler_calls_total", status="completed", pool="nightly.json") == 4
    assert value(got, "pooler_calls_total", status="failed") == 1
    assert value(got, "pooler_calls_total", status="in_doubt") == 1
    assert value(got, "pooler_calls_in_doubt") == 1
    assert value(got, "pooler_rows_total", status="completed") == 3
    assert value(got, "pooler_run_success") == 0
    assert value(got, "pooler_store_answer_seconds_count") == 6
    assert value(got, "pooler_last_success_timestamp_seconds") == 0
    assert value(got, "node_textfile_mtime_seconds") == pytest.approx(
        (folder / "nightly.prom").stat().st_mtime, abs=1)


def test_node_exporter_types_each_counter_as_a_counter_with_its_help(
        store: Store, tmp_path: Path, node_exporter: tuple[str, Path]) -> None:
    url, folder = node_exporter
    done = run_cli(store, tmp_path, mixed_pool(tmp_path), "--metrics-file", str(folder / "nightly.prom"))
    assert done.returncode == 1, done.stderr
    scraped = requests.get(url, timeout=10).text.splitlines()
    for name in COUNTERS:
        assert f"# TYPE {name} counter" in scraped, name
    assert "# HELP pooler_calls_total Calls of the last run, by the status each ended with." in scraped
    assert not [line for line in scraped if line.startswith("# TYPE pooler_") and line.endswith(" untyped")]


def test_promtool_check_metrics_passes_the_metrics_file_of_a_run_as_it_goes_and_as_it_ends(
        store: Store, tmp_path: Path) -> None:
    exe = promtool()
    # As a run starts (no end yet, nothing counted) and as it ends.
    going = tmp_path / "going.prom"
    reporter = MetricsReporter(going, pool="nightly.json", store="shop", interval=3600)
    reporter.start()
    assert promtool_problems(going, exe) == ""
    reporter.close()
    ended = tmp_path / "nightly.prom"
    done = run_cli(store, tmp_path, mixed_pool(tmp_path), "--metrics-file", str(ended))
    assert done.returncode == 1, done.stderr
    assert promtool_problems(ended, exe) == ""
    lines = going.read_text(encoding="utf-8").splitlines()
    assert lines[lines.index("# TYPE pooler_calls_total counter") - 1:][:3] == [
        "# HELP pooler_calls_total Calls of the last run, by the status each ended with.",
        "# TYPE pooler_calls_total counter",
        'pooler_calls_total{pool="nightly.json",store="shop",status="completed"} 0']


def test_a_metrics_file_that_can_no_longer_be_written_is_told_once_and_the_run_goes_on(
        store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "textfile"
    folder.mkdir()
    told: list[str] = []
    reporter = MetricsReporter(folder / "n.prom", pool="n", store="s", warn=told.append)
    pool = make_pool(tmp_path, [step(TEST, "CmdEcho"), step(TEST, "CmdEcho")])

    def gone(step: Any, result: dict[str, Any]) -> None:
        # The folder disappears under the run (unmounted, removed by a cleanup job).
        shutil.rmtree(folder, ignore_errors=True)

    with reporter:
        answer = run(pool, store, tmp_path / "out", reporter=FanOut([reporter, Recorder(on_finish=gone)]))
        reporter.write()
    assert answer["status"] == "completed"
    assert told == [(f"pooler: WARNING: --metrics-file {folder / 'n.prom'} could not be written (No such "
                     "file or directory); the run goes on without it")]
