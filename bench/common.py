"""What every benchmark case shares: the store, timed processes, peak memory, medians, tables."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
PYTHON = sys.executable
TOKEN = "bench-token-5c1e0a9d"
STORE_START_TIMEOUT = 30.0
PROCESS_TIMEOUT = 3600.0

# A process started by a big parent inherits the parent's high-water RSS through exec (Linux keeps
# the old mm's peak in ru_maxrss), so peak memory is taken through this tiny stdlib-only trampoline:
# its own mm is small and fresh, and wait4 gives the one child's rusage.
_TRAMPOLINE = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write("%d %d %f" % (os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024,
                            usage.ru_utime + usage.ru_stime))
"""


def pooler_cmd() -> list[str]:
    """The ``pooler`` console script beside this interpreter, as a user runs it."""
    script = Path(PYTHON).with_name("pooler")
    return [str(script)] if script.exists() else [PYTHON, "-m", "pooler"]


@dataclass
class Sample:
    """One timed process: wall and CPU seconds, exit status, and what the case read from it."""

    seconds: float
    status: int
    cpu: float
    peak_rss: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class BenchError(RuntimeError):
    """A benchmark could not measure what it set out to (a process failed, a store did not start)."""


class Work:
    """A case's fresh temporary folder, with a counter for per-run subfolders."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._n = 0
        self.env = child_env(tmp)
        self.token_file = tmp / "token"
        self.token_file.write_text(TOKEN + "\n", encoding="utf-8")
        self.token_file.chmod(0o600)

    def fresh(self, label: str) -> Path:
        """A new empty folder for one run's --out and --journal."""
        self._n += 1
        path = self.tmp / f"{label}-{self._n}"
        path.mkdir()
        return path


@contextlib.contextmanager
def work(case: str) -> Iterator[Work]:
    with tempfile.TemporaryDirectory(prefix=f"pooler-bench-{case}-") as tmp:
        yield Work(Path(tmp))


#: Settings a user's shell does not usually have, which change what a process costs.
_NOT_PASSED = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONPROFILEIMPORTTIME")


def child_env(tmp: Path) -> dict[str, str]:
    """The environment of every measured process: no POOLER_* settings, state kept in ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POOLER_") and k not in _NOT_PASSED}
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    # Compiled modules go to the temporary folder too; each case's warm-up run fills it (without
    # them every process would compile every module again, which no user's pooler does).
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    return env


@dataclass
class Store:
    url: str
    proc: subprocess.Popen[bytes]

    def cpu(self) -> float:
        """The store's CPU seconds so far (user + system), from /proc; 0 where there is none."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        # utime and stime are fields 14 and 15 of stat; the split starts at field 3.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def store(w: Work, *args: str) -> Iterator[Store]:
    """``pooler store serve`` on a free port of 127.0.0.1, its db and root in the case's folder."""
    folder = w.fresh("store")
    log = (folder / "store.log").open("wb")
    cmd = [*pooler_cmd(), "store", "serve", "--host", "127.0.0.1", "--port", "0",
           "--db", str(folder / "store.db"), "--root", str(folder / "root"),
           *(() if "--token" in args else ("--token", TOKEN)), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=w.env, cwd=w.tmp)
    first: list[bytes] = []
    started = threading.Event()
    reader = threading.Thread(target=_read_stdout, args=(proc, first, started), daemon=True)
    reader.start()
    try:
        started.wait(STORE_START_TIMEOUT)
        url = first[0].decode("utf-8", "replace").strip() if first else ""
        if not url.startswith("http://127.0.0.1:"):
            log.flush()
            err = (folder / "store.log").read_text(encoding="utf-8", errors="replace")[-2000:]
            raise BenchError(f"the store did not start: it printed {url!r}; its log ends:\n{err}")
        yield Store(url, proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(10)
        log.close()


def _read_stdout(proc: subprocess.Popen[bytes], first: list[bytes], started: threading.Event) -> None:
    """The store's first line (its URL), then the rest read and dropped, so a full pipe never
    stops the store; ends when the store does."""
    assert proc.stdout is not None
    with proc.stdout:
        first.append(proc.stdout.readline())
        started.set()
        while proc.stdout.read(1 << 16):
            pass


def run_process(cmd: list[str], w: Work, *, cwd: Path | None = None, label: str = "run",
                peak_memory: bool = False, check: bool = True,
                store: Store | None = None) -> tuple[Sample, Path, Path]:
    """Run ``cmd`` once, stdout and stderr into files (so no pipe slows it).

    Wall time by this clock; CPU time (user + system) from ``wait4``, which the other load on the
    machine disturbs far less; with ``peak_memory`` the RSS high-water mark, through the trampoline;
    with ``store``, the CPU time the store spent meanwhile (``extra["store_cpu"]``).
    """
    folder = w.fresh(label + "-io")
    out_path, err_path, usage_path = folder / "stdout", folder / "stderr", folder / "rusage"
    full = [PYTHON, "-S", "-c", _TRAMPOLINE, str(usage_path), *_resolved(cmd)] if peak_memory else cmd
    store_before = store.cpu() if store is not None else 0.0
    with out_path.open("wb") as out, err_path.open("wb") as err:
        start = time.perf_counter()
        # A session of its own, so a timeout ends the trampoline's child too.
        proc = subprocess.Popen(full, stdout=out, stderr=err, env=w.env, cwd=cwd or w.tmp,
                                start_new_session=True)
        timer = threading.Timer(PROCESS_TIMEOUT, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, wait_status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
    proc.returncode = status = os.waitstatus_to_exitcode(wait_status)
    if status == -signal.SIGKILL and seconds >= PROCESS_TIMEOUT:
        raise BenchError(f"{' '.join(cmd[:4])}... ran longer than {PROCESS_TIMEOUT:.0f} s")
    cpu, peak = usage.ru_utime + usage.ru_stime, None
    if peak_memory:
        status_text, peak_text, cpu_text = usage_path.read_text(encoding="utf-8").split()
        status, peak, cpu = int(status_text), int(peak_text), float(cpu_text)
    if check and status != 0:
        tail = err_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise BenchError(f"{' '.join(cmd)} exited with {status}; stderr ends:\n{tail}")
    sample = Sample(seconds, status, cpu, peak)
    if store is not None:
        sample.extra["store_cpu"] = store.cpu() - store_before
    return sample, out_path, err_path


def _resolved(cmd: list[str]) -> list[str]:
    """posix_spawn takes a path, not a name to look up."""
    found = shutil.which(cmd[0]) if os.sep not in cmd[0] else cmd[0]
    return [found or cmd[0], *cmd[1:]]


def read_answer(out_path: Path) -> dict[str, Any]:
    """The one JSON document ``--json`` printed."""
    try:
        answer: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BenchError(f"the answer in {out_path} is not JSON: {exc}") from exc
    return answer


def expect_run(answer: dict[str, Any], calls: int) -> None:
    """A run that did not do all its calls measured something else: refuse to report it."""
    done = answer.get("succeeded")
    if answer.get("status") != "completed" or (done is not None and done != calls):
        raise BenchError(f"the run did not complete its {calls} calls: status {answer.get('status')!r}, "
                         f"succeeded {done!r}, total {answer.get('total')!r}")


def trip_seconds(answer: dict[str, Any]) -> float | None:
    """The run's own clock of the whole pool (``time.trip``, ms), without process start-up."""
    trip = (answer.get("time") or {}).get("trip")
    return None if trip is None else float(trip) / 1000.0


def run_pool(w: Work, st: Store, pool: Path, calls: int, *, label: str = "pooler",
             peak_memory: bool = False, extra: Sequence[str] = ()) -> Sample:
    """``pooler run POOL --json`` with a fresh --out, --journal and task; checks every call completed.

    ``extra`` are more flags; ``{folder}`` in one is the run's own folder.
    """
    folder = w.fresh(label)
    cmd = [*pooler_cmd(), "run", str(pool), "--store", st.url, "--token-file", str(w.token_file),
           "--out", str(folder / "out"), "--journal", str(folder / "journal.db"),
           "--task", f"bench-{folder.name}", "--json", *(a.replace("{folder}", str(folder)) for a in extra)]
    sample, out_path, _ = run_process(cmd, w, label=label, peak_memory=peak_memory, store=st)
    answer = read_answer(out_path)
    expect_run(answer, calls)
    sample.extra["trip"] = trip_seconds(answer)
    return sample


def end_on_sigterm() -> None:
    """SIGTERM ends the bench like an exception, so running processes, the store and the
    temporary folders are cleaned up on the way out."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def alternate(commands: dict[str, Callable[[], Sample]], runs: int,
              warmup: bool = True) -> dict[str, list[Sample]]:
    """A warm-up run of each, then ``runs`` rounds taking the commands in turn.

    Each round starts one further along, so no command always runs first after another one.
    """
    names = list(commands)
    if warmup:
        for name in names:
            commands[name]()
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for r in range(runs):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            samples[name].append(commands[name]())
    return samples


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def secs(samples: list[Sample]) -> float:
    return median([s.seconds for s in samples])


def cpu(samples: list[Sample]) -> float:
    return median([s.cpu for s in samples])


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_run(samples: list[Sample]) -> str:
    """Median wall time, and median CPU time beside it."""
    return f"{fmt_s(secs(samples))} (cpu {fmt_s(cpu(samples))})"


def series(samples: list[Sample]) -> dict[str, list[float]]:
    """Every sample's wall and CPU seconds (and the store's CPU seconds), for the JSON results."""
    return {"wall_s": [s.seconds for s in samples], "cpu_s": [s.cpu for s in samples],
            "store_cpu_s": [s.extra.get("store_cpu", 0.0) for s in samples]}


def idle_estimate(a: list[Sample], b: list[Sample]) -> float:
    """a / b as an idle machine would see it: each side's CPU time plus the store's.

    A sequential run waits for the store on every call, so on an idle machine its time is about the
    client's CPU time plus the store's; busy neighbours stretch the wall clock, not these.
    """
    def total(samples: list[Sample]) -> float:
        return median([s.cpu + s.extra.get("store_cpu", 0.0) for s in samples])

    return total(a) / total(b)


def fmt_mb(size: float) -> str:
    return f"{size / 1e6:.1f} MB"
