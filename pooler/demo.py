"""``python -m pooler.demo`` (``make demo``): the reference store and the demo pool, end to end.

It starts ``pooler store serve`` on a free port with its database in a temporary folder, runs the
demo pool (pools/demo.yaml, which the wheel carries as pooler/data/demo.yaml) against it with
``pooler run``, shows the run and its answer, stops the store and exits with the run's status.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pooler.cli import main as pooler_main
from pooler.exits import ExitStatus


def demo_pool() -> Path:
    """The demo pool: the installed package's copy, else the repository's pools/demo.yaml."""
    packaged = Path(__file__).resolve().parent / "data" / "demo.yaml"
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parents[1] / "pools" / "demo.yaml"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pooler.demo",
        description="Start the reference store in a temporary folder, run the demo pool against it, "
                    "show the run and its answer, and stop the store.",
    )
    parser.add_argument("--out", metavar="DIR", default=os.environ.get("POOLER_DEMO_OUT", "out/demo"),
                        help="where the run's tables and journal go "
                             "(env POOLER_DEMO_OUT; default ./out/demo)")
    parser.add_argument("--pool", metavar="FILE", default=str(demo_pool()), help="the pool to run")
    return parser.parse_args(argv)


def shown(path: str) -> str:
    """``pools/demo.yaml`` rather than a long absolute path, when it is under the current folder."""
    absolute = Path(path).absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def start_store(folder: Path, token: str) -> tuple[subprocess.Popen[str], str]:
    """``pooler store serve`` on a free port; its URL is the first line it prints."""
    log = (folder / "store.log").open("w", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pooler", "store", "serve", "--port", "0", f"--token={token}",
         "--db", str(folder / "store.db"), "--root", str(folder / "root")],
        stdout=subprocess.PIPE, stderr=log, text=True, cwd=folder,
    )
    log.close()
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        proc.wait()
        text = (folder / "store.log").read_text(encoding="utf-8", errors="replace")
        raise RuntimeError(f"the reference store did not start: {url!r}\n{text}")
    return proc, url


def stop_store(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out = Path(args.out)
    report = out / "report.html"
    out.mkdir(parents=True, exist_ok=True)
    say = sys.stderr.write
    # A fresh token per demo, given to the store and to pooler alike.
    token = "demo-" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="pooler-demo-") as tmp:
        try:
            proc, url = start_store(Path(tmp), token)
        except (OSError, RuntimeError) as exc:
            say(f"pooler demo: {exc}\n")
            return ExitStatus.FAILED
        try:
            say(f"pooler demo: the reference store is up at {url} (its data lives in {tmp})\n")
            say(f"pooler demo: pooler run {shown(args.pool)} --store {url} --out {out} --report {report} "
                "--json\n\n")
            environ = {**os.environ, "POOLER_TOKEN": token}
            status = pooler_main(
                ["run", shown(args.pool), "--store", url, "--out", str(out),
                 "--journal", str(out / "journal.sqlite"), "--report", str(report), "--json"],
                environ=environ,
            )
        finally:
            stop_store(proc)
    say(f"\npooler demo: exit status {status}; the tables are in {out / 'tables'}.\n"
        f"pooler demo: 'pooler runs --journal {out / 'journal.sqlite'}' lists this run.\n")
    if report.is_file():
        say(f"pooler demo: the run's report is {report.absolute()} - open it in a browser "
            f"(file://{report.absolute()}).\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
