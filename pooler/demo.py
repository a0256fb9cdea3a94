"""``python -m pooler.demo`` (``make demo``): the reference store and the demo pool, end to end.

It starts ``pooler store serve`` on a free port with its database in a temporary folder, runs the
demo pool (pools/demo.yaml, which the wheel carries as pooler/data/demo.yaml) against it with
``pooler run`` and shows the run as an operator sees it (the live view on a terminal, plain lines
elsewhere); the answer goes to a file, the run's HTML report to another, and the demo ends by saying
where the answer, the tables and the report are. It stops the store and exits with the run's status.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pooler.cli.main import main as pooler_main
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
    answer, journal = out / "answer.json", out / "journal.sqlite"
    report = out / "report.html"
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
                f"--json > {answer}\n\n")
            environ = {**os.environ, "POOLER_TOKEN": token}
            out.mkdir(parents=True, exist_ok=True)
            # The answer (one JSON document) goes to its file; the run shows on stderr as it would
            # to an operator: the live view on a terminal, plain lines in a log.
            with answer.open("w", encoding="utf-8") as document:
                status = pooler_main(
                    ["run", shown(args.pool), "--store", url, "--out", str(out),
                     "--journal", str(journal), "--report", str(report), "--json"],
                    stdout=document, environ=environ,
                )
        finally:
            stop_store(proc)
    say(f"\npooler demo: exit status {status}.\n")
    for line in where_things_are(answer, journal, out):
        say(f"pooler demo: {line}\n")
    if report.is_file():
        say(f"pooler demo: the run's report is {report.absolute()} - open it in a browser "
            f"(file://{report.absolute()}).\n")
    return status


def where_things_are(answer: Path, journal: Path, out: Path) -> list[str]:
    """Where the run left its answer and tables, and the commands that show them again."""
    try:
        task = json.loads(answer.read_text(encoding="utf-8")).get("task")
    except (OSError, ValueError):
        task = None
    tables = sorted((out / "tables").glob("*.jsonl"))
    lines = [f"the answer (JSON): {answer}"]
    lines += [f"a table: {t}" for t in tables]
    if task:
        lines.append(f"the run again, from the journal: pooler show {task} --journal {journal}")
    lines.append(f"every run: pooler runs --journal {journal}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
