"""A big pool file is checked in memory in proportion to the file: a 15 MB pool of 180,000
one-line steps within 300 MB at its peak (it took 1.1 GB while the YAML's node graph and every
value's mark were held at once)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import common

from pooler.pool.model import Source
from pooler.pool.positions import build, compose
from pooler.pool.streamed import parse

STEPS = 180_000
PEAK = 300_000_000


# A measurement of a big file: run by `make test-slow` (CI's slow run), not by make test.
@pytest.mark.slow
@pytest.mark.process
def test_a_15_mb_pool_of_180000_steps_checks_within_300_mb(tmp_path: Path) -> None:
    pool = tmp_path / "night.yaml"
    with pool.open("w", encoding="utf-8") as out:
        out.write("pool:\n")
        out.writelines(f'  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, params: '
                       f'{{note: "night row {i:06}"}}}}\n' for i in range(STEPS))
    assert 15_000_000 <= pool.stat().st_size <= 16_000_000
    with common.work("check-memory") as w:
        # Through the bench's trampoline: the peak is the checking process's own, not this one's.
        sample, out_path, _ = common.run_process([common.PYTHON, "-m", "pooler", "check", str(pool)], w,
                                                 peak_memory=True, label="check")
        said = out_path.read_text(encoding="utf-8")
    assert said == "1 file valid\n"
    assert sample.peak_rss is not None
    assert sample.peak_rss < PEAK, f"peak {sample.peak_rss / 1e6:.0f} MB"


TEXTS = [
    ("pool:\n  - {unit: U, command: C, params: {a: [1, 'x', {b: null}], c: \"@s.id\"}}\n"
    "  - unit: U\n    command: C\n    params:\n      deep:\n        - - 1\n          - two\n"),
    ("mode: parallel\npool:\n- name: a\n  unit: U\n  command: C\n  key: k-${row.n}\n"
    "  for_each: {file: rows.csv, chunk: 5, field: goods}\n  chunk_row: {sku: '${row.n}'}\n"),
    "{\"pool\": [{\"unit\": \"U\", \"command\": \"C\", \"params\": {\"x\": [1, 2]}}]}\n",
    ("pool:\n  - unit: U\n    command: C\n    params: |\n      a block\n      of text\n    description: >-\n"
    "      folded\n  - {unit: V, command: D, params: {}}\n"),
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_file_read_from_events_tells_every_position_the_node_graph_tells(text: str) -> None:
    graph = Source(file="p.yaml", lines=text.splitlines())
    value = build(compose(text, graph), graph)
    events = Source(file="p.yaml", lines=text.splitlines())
    done, streamed = parse(text, events, max_depth=64, max_nodes=1000)
    assert done
    assert streamed == value
    assert dict(events.positions.items()) == dict(graph.positions.items())
