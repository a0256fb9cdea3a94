"""The results of a benchmark: rows of the final table, the files under bench/results, the command line."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common import RESULTS, ROOT, BenchError, end_on_sigterm


@dataclass
class Row:
    """A line of the final table."""

    case: str
    measured: str
    compared: str
    ratio: float | None
    target: str
    met: bool | None
    data: dict[str, Any] = field(default_factory=dict)

    def cells(self) -> list[str]:
        met = "—" if self.met is None else ("yes" if self.met else "NO")
        ratio = "—" if self.ratio is None else f"{self.ratio:.2f}"
        return [self.case, self.measured, self.compared, ratio, self.target, met]


HEADER = ["case", "measured (median)", "compared / floor", "ratio", "target", "met"]


def table(rows: list[Row]) -> str:
    """A Markdown table, readable as plain text too."""
    lines = [[*HEADER], *(r.cells() for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    out = []
    for n, line in enumerate(lines):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "load_average": list(os.getloadavg())}


def save(name: str, rows: list[Row], settings: dict[str, Any], notes: list[str]) -> Path:
    """``bench/results/<name>.md`` and ``.json``; returns the Markdown file."""
    RESULTS.mkdir(exist_ok=True)
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    info = machine()
    load = ", ".join(f"{x:.2f}" for x in info["load_average"])
    about = (f"{when}; Python {info['python']}, {info['cpus']} CPUs, {info['platform']}; "
             f"load average at the end {load}; settings {json.dumps(settings)}")
    md = [f"# pooler benchmarks: {name}", "", about, "", table(rows), ""]
    md += [f"- {note}" for note in notes]
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(md) + "\n", encoding="utf-8")
    doc = {"name": name, "when": when, "machine": info, "settings": settings, "notes": notes,
           "rows": [asdict(r) for r in rows]}
    (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


@dataclass
class Settings:
    """The command line every case shares."""

    runs: int
    quick: bool
    shared: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "quick": self.quick}


def parse_settings(description: str, argv: list[str] | None = None,
                   extra: Callable[[argparse.ArgumentParser], None] | None = None,
                   ) -> tuple[Settings, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="measured runs of each command (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 runs of each command instead of 5")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    runs = 2 if args.quick else args.runs
    if not 1 <= runs <= 100:
        parser.error("--runs must be between 1 and 100")
    return Settings(runs=runs, quick=args.quick), args


Case = Callable[[Settings], tuple[list[Row], list[str]]]


def main_for(name: str, description: str, case: Case, argv: list[str] | None = None) -> int:
    """What ``python bench/<case>.py`` does: run the one case, print and save its table."""
    settings, _ = parse_settings(description, argv)
    end_on_sigterm()
    try:
        rows, notes = case(settings)
    except BenchError as exc:
        print(f"bench {name}: {exc}", file=sys.stderr)
        return 1
    print(table(rows))
    for note in notes:
        print(f"- {note}")
    print(f"\nsaved {save(name, rows, settings.as_dict(), notes).relative_to(ROOT)}")
    return 0
