"""The promise of one plan, as a differential property: for generated pools and data files, run
with the same variables, a pool ``pooler check --data`` accepts runs with every call completed
(never refused, no call failing on something the plan could know), and a pool it refuses is refused
by ``pooler run`` before anything is sent.

``make test`` tries a few hundred pools; ``make fuzz`` (POOLER_FUZZ_EXAMPLES) thousands.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import STORE_TOKEN, Store, environment, start_store
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pooler.cli.main import main

EXAMPLES = max(200, int(os.environ.get("POOLER_FUZZ_EXAMPLES", "100")) // 4)
AGREE = settings(max_examples=EXAMPLES, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ECHO = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}

fields = st.sampled_from(["sku", "name", "qty", "ref"])
#: Row values from a small alphabet, so two rows often share a key; é tells the encodings apart.
cell = st.sampled_from(["A", "B", "c", "é", "1", "x y", ""])
json_cell = st.sampled_from(["A", "B", 1, 2.5, None, True, "é"] * 5 + ["NaN", "Infinity", "1e999"])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    found = start_store(tmp_path_factory.mktemp("agree-store"))
    yield found
    found.stop()


@st.composite
def data_files(draw: st.DrawFn) -> dict[str, Any]:
    """A CSV or JSONL file's text as bytes, how the pool declares it, and its header."""
    header = draw(st.lists(fields, min_size=1, max_size=3, unique=True))
    count = draw(st.integers(0, 4))
    if draw(st.booleans()):
        delimiter = draw(st.sampled_from([",", ",", ",", ";", "\t"]))
        text = io.StringIO()
        writer = csv.writer(text, delimiter=delimiter, lineterminator="\n")
        writer.writerow(header)
        for _ in range(count):
            writer.writerow([draw(cell) for _ in header])
        encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "latin-1"]))
        declared: dict[str, Any] = {}
        if (delimiter != "," and draw(st.integers(0, 4)) > 0) or draw(st.integers(0, 4)) == 0:
            declared["delimiter"] = delimiter
        if (encoding != "utf-8" and draw(st.integers(0, 4)) > 0) or draw(st.integers(0, 4)) == 0:
            declared["encoding"] = draw(st.sampled_from([encoding, encoding, "utf-8", "latin-1"]))
        return {"bytes": text.getvalue().encode(encoding), "suffix": ".csv", "declared": declared,
                "header": header}
    lines = []
    for _ in range(count):
        chosen = header if draw(st.integers(0, 5)) else draw(st.lists(st.sampled_from(header), unique=True))
        lines.append("{" + ", ".join(f'"{k}": {draw(json_cell)}' for k in chosen) + "}")
    return {"bytes": ("\n".join(lines) + "\n").encode("utf-8"), "suffix": ".jsonl", "declared": {},
            "header": header}


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    data = draw(data_files())
    variables: dict[str, Any] = {}
    given: dict[str, str] = {}
    dated = draw(st.booleans())
    if dated:
        variables["day"] = {"description": "the feed's day"}
        if draw(st.integers(0, 5)):
            given["day"] = draw(st.sampled_from(["d1", "d1", "d1", "d2"]))
    if draw(st.booleans()):
        variables["shop"] = {"default": "S"} if draw(st.booleans()) else {"description": "no default"}
        if draw(st.booleans()):
            given["shop"] = "T"
    name = ("rows-${day}" if dated else "rows") + data["suffix"]
    usable = st.sampled_from(data["header"]) if draw(st.integers(0, 5)) else fields
    used = draw(st.lists(usable, min_size=1, max_size=2, unique=True))
    over: dict[str, Any] = {**ECHO, "name": "each",
                            "params": {f: f"${{row.{f}}}" for f in used},
                            "for_each": {"file": name, **data["declared"]}}
    if draw(st.booleans()):
        over["key"] = "k-" + "-".join(f"${{row.{f}}}" for f in draw(st.lists(usable, min_size=1,
                                                                           max_size=2, unique=True)))
    first: dict[str, Any] = {**ECHO, "name": "one",
                             "params": {"m": {"0": "a", "1": "b"}, "l": ["c"]}}
    into = draw(st.sampled_from([None, None, None, None, "job", "a+b", "x.y"]))
    if into is not None:
        first["into"] = into
    later: dict[str, Any] = {**ECHO, "params": {"x": draw(st.sampled_from(["@one.m.0", "@one.l.0",
                                                                         "@one.m.1"]))}}
    if "shop" in variables:
        later["params"]["shop"] = "${shop}"
    steps = [first, over, later]
    pool: dict[str, Any] = {"mode": draw(st.sampled_from(["sequential", "parallel"])), "pool": steps}
    if variables:
        pool["vars"] = variables
    return {"pool": pool, "data": data, "given": given, "file_day": "d1",
            "write_data": draw(st.integers(0, 9)) > 0}


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err, environ=environment({"POOLER_TOKEN": STORE_TOKEN}))
    return status, out.getvalue(), err.getvalue()


@AGREE
@given(case=cases())
def test_what_check_accepts_runs_and_what_it_refuses_run_refuses_unsent(store: Store,
                                                                       case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        path = work / "pool.yaml"
        path.write_text(yaml.safe_dump(case["pool"]), encoding="utf-8")
        data = case["data"]
        if case["write_data"]:
            day = case["file_day"]
            file = ("rows-" + day if "vars" in case["pool"] and "day" in case["pool"]["vars"] else "rows")
            (work / (file + data["suffix"])).write_bytes(data["bytes"])
        given_args = [arg for n, v in case["given"].items() for arg in ("--var", f"{n}={v}")]
        checked, told, _ = cli("check", str(path), "--data", "--env", *given_args)
        assert checked in (0, 2), told
        before = len(store.ops())
        status, out, said = cli("run", str(path), "--store", store.url, "--out", str(work / "out"),
                           "--journal", str(work / "journal.sqlite"), "--json", *given_args)
        if checked == 0:
            event("accepted by check")
            assert status == 0, said
            answer = json.loads(out)
            assert answer["result"] is True, said
            assert {e["status"] for e in answer["steps"]} <= {"completed"}
        else:
            event("refused by check")
            assert status == 2, (told, said)
            assert "refused before the first step; nothing was sent" in said
            assert len(store.ops()) == before
