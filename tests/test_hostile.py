"""Hostile input: YAML tags, alias bombs, deep nesting, oversized files, a store that names its
tables like paths, symlinks in --out, and the modes of the files pooler writes.

Each refusal is one clear error before anything is sent; memory stays bounded (tracemalloc peak),
and subprocesses get a generous timeout instead of any wall-clock assert.
"""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, environment, pooler, send_answer, serve

from pooler.cli.commands.common import INSECURE_WARNING
from pooler.client.arguments import prepare_call
from pooler.errors import InputError, PoolerError
from pooler.pool.loader import load_pool
from pooler.run.tables import TableWriter

TEST = "MELBIS_AGENT_TEST"
NOT_SENT = "pooler: refused before the first step; nothing was sent."
MB = 1 << 20
#: A parse that is refused early stays far below this (the reader's own buffer is 16 MB).
MEMORY_BOUND = 64 * MB


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def steps(command: str, *lines: str) -> str:
    """A pool of one MELBIS_AGENT_TEST step, with more lines of the step."""
    return f"pool:\n  - unit: {TEST}\n    command: {command}\n" + "".join(f"    {line}\n" for line in lines)


def refused(path: Path) -> tuple[PoolerError, int]:
    """The error ``load_pool`` raises, and the peak of memory it took to get there."""
    tracemalloc.start()
    try:
        with pytest.raises(PoolerError) as caught:
            load_pool(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return caught.value, peak


def run(store: Store, tmp_path: Path, pool: Path, *extra: str, timeout: float = 120,
        **kw: Any) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "state" / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token}, timeout=timeout, **kw)


# YAML tags


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system [\"touch {marker}\"]",
    "!!python/object:os.system {{}}",
    "!!python/name:os.system ''",
    "!!python/object/new:os.system [\"touch {marker}\"]",
    "!!binary aGVsbG8=",
    "!!set {{a, b}}",
])
def test_a_yaml_tag_that_builds_objects_is_refused_and_never_run(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "owned"
    text = f"pool:\n  - unit: {TEST}\n    command: CmdEcho\n    params: {{x: {tag.format(marker=marker)}}}\n"
    path = write(tmp_path, "tagged.yaml", text)
    error, _ = refused(path)
    name = tag.split(maxsplit=1)[0].split("[", maxsplit=1)[0]
    assert error.render().splitlines()[0] == (
        f"{path}:4:17: the tag {name} is not supported - a pool file holds JSON values only: text, "
        "numbers, true/false, null, lists and mappings.")
    proc = pooler("check", str(path))
    assert proc.returncode == 2
    assert f"the tag {name} is not supported" in proc.stdout
    assert not marker.exists()


def test_a_tag_in_a_vars_file_is_refused_too(store: Store, tmp_path: Path) -> None:
    marker = tmp_path / "owned"
    pool = write(tmp_path, "pool.yaml", "vars: {who: {}}\n" + steps("CmdEcho", 'params: {who: "${who}"}'))
    values = write(tmp_path, "vars.yaml", f"who: !!python/object/apply:os.system [\"touch {marker}\"]\n")
    proc = run(store, tmp_path, pool, "--vars-file", str(values))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == (
        f"{values}:1:6: the tag !!python/object/apply:os.system is not supported - a pool file holds JSON "
        "values only: text, numbers, true/false, null, lists and mappings.")
    assert proc.stderr.splitlines()[-1] == NOT_SENT
    assert not marker.exists()
    assert store.ops() == []


def test_a_tag_in_the_stores_config_file_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "owned"
    config = write(tmp_path, "stores.yaml",
                   f"stores: !!python/object/apply:os.system [\"touch {marker}\"]\n")
    proc = pooler("tools", "--store", "prod", "--config", str(config))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"{config}:1:9: the config file {config} is not valid YAML")
    assert not marker.exists()


# Alias bombs and deep nesting


def laughs(levels: int, width: int, *, mapping: bool = False) -> str:
    """The billion laughs: every level repeats the one below ``width`` times."""
    if mapping:
        lines = ["l0: &l0 {" + ", ".join(f"k{j}: lol" for j in range(width)) + "}"]
        lines += [f"l{i}: &l{i} {{" + ", ".join(f"k{j}: *l{i - 1}" for j in range(width)) + "}"
                  for i in range(1, levels)]
    else:
        lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
        lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\npool: [{{unit: {TEST}, command: CmdEcho, params: {{x: *l{levels - 1}}}}}]\n"


@pytest.mark.parametrize(("name", "text"), [
    ("billion.yaml", laughs(10, 10)),
    ("googol.yaml", laughs(100, 10)),
    ("mappings.yaml", laughs(12, 10, mapping=True)),
    ("merges.yaml", "m0: &m0 {a: 1, b: 2}\n" + "".join(
        f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 10)}], x{i}: [{', '.join([f'*m{i - 1}'] * 10)}]}}\n"
        for i in range(1, 12)) + f"pool: [{{unit: {TEST}, command: CmdEcho, params: *m11}}]\n"),
])
def test_an_alias_bomb_is_refused_in_bounded_memory(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path, name, text)
    error, peak = refused(path)
    assert isinstance(error, InputError)
    assert error.message == ("the file expands to more than 1,000,000 values through aliases (&anchor and "
                             "*alias) - write it without such repetition.")
    assert error.problem.file == str(path)
    assert error.problem.line is not None
    assert peak < MEMORY_BOUND, f"peak {peak / MB:.1f} MB"


def test_an_alias_loop_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "loop.yaml", f"pool: &p [{{unit: {TEST}, command: CmdEcho, params: {{x: *p}}}}]\n")
    error, peak = refused(path)
    assert error.message in (
        "an alias refers to a value that holds it - a pool file cannot hold a loop; write the value out.",
        # libyaml may not let an alias point into its own anchor at all
        "not valid YAML: found undefined alias - fix the syntax at this spot.")
    assert peak < MEMORY_BOUND


DEEP = 100_000
DEEP_MESSAGE = "the file nests deeper than 64 levels - a pool needs only a few; flatten the data."


@pytest.mark.parametrize(("name", "text"), [
    ("flow.yaml", "pool: " + "[" * DEEP + "]" * DEEP + "\n"),
    ("open.yaml", "pool: " + "[" * DEEP + "\n"),
    ("block.yaml", "pool:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(1000))),
    ("lists.json", '{"pool": ' + "[" * DEEP + "]" * DEEP + "}"),
    ("objects.json", '{"pool": [{"unit": "U", "command": "C", "params": ' + '{"a": ' * DEEP + "1"
     + "}" * DEEP + "}]}"),
])
def test_deep_nesting_is_refused_in_bounded_memory(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path, name, text)
    error, peak = refused(path)
    assert error.message == DEEP_MESSAGE
    assert error.problem.file == str(path)
    assert peak < MEMORY_BOUND, f"peak {peak / MB:.1f} MB"


def test_a_deep_params_source_is_refused_before_anything_is_sent(store: Store, tmp_path: Path) -> None:
    write(tmp_path, "params.json", '{"a": ' * DEEP + "1" + "}" * DEEP)
    pool = write(tmp_path, "pool.yaml", f"pool:\n  - unit: {TEST}\n    command: CmdEcho\n"
                                        "    params_source: params.json\n")
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 2
    # The caret points at the params_source line that names the file.
    assert proc.stderr.splitlines()[:3] == [
        f"{pool}:4:20: {DEEP_MESSAGE}",
        "    4 |     params_source: params.json",
        "      |                    ^"]
    assert proc.stderr.splitlines()[-1] == NOT_SENT
    assert store.ops() == []


def test_the_cli_refuses_a_bomb_in_its_own_process(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.yaml", laughs(30, 10))
    proc = pooler("check", str(path), timeout=120)
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[0].endswith(
        "the file expands to more than 1,000,000 values through aliases (&anchor and *alias) - write it "
        "without such repetition.")


# Size limits


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no room on disk."""
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def test_a_pool_file_over_16_mb_is_refused(tmp_path: Path) -> None:
    path = sparse(tmp_path / "big.yaml", 16 * MB + 1)
    proc = pooler("check", str(path))
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[0] == (
        f"{path}: {path} is larger than 16 MB - split it into smaller files.")


def test_a_params_source_over_16_mb_is_refused_before_anything_is_sent(store: Store, tmp_path: Path) -> None:
    sparse(tmp_path / "params.json", 16 * MB + 1)
    pool = write(tmp_path, "pool.yaml", f"pool:\n  - unit: {TEST}\n    command: CmdEcho\n"
                                        "    params_source: params.json\n")
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 2
    assert f"{tmp_path / 'params.json'} is larger than 16 MB - split it into smaller files." in proc.stderr
    assert proc.stderr.splitlines()[-1] == NOT_SENT
    assert store.ops() == []


@pytest.mark.parametrize("flag", ["--params-source", "--files-source"])
def test_a_call_source_over_64_mb_is_refused_and_nothing_is_sent(store: Store, tmp_path: Path,
                                                                  flag: str) -> None:
    source = sparse(tmp_path / "source.json", 64 * MB + 1)
    proc = pooler("call", TEST, "CmdEcho", flag, str(source), "--store", store.url,
                  "--out", str(tmp_path / "out"), env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"pooler: {source} is 64 MB, over the 64 MB a file read whole may hold - "
                                   "split it, or send its rows by a step over rows.")
    assert store.ops() == []


def test_the_source_limit_is_checked_before_the_file_is_read(tmp_path: Path) -> None:
    source = sparse(tmp_path / "params.json", 2048)
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as caught:
            prepare_call(params_source=str(source), base=tmp_path, max_source_bytes=1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.message == (f"{source} is 2 KB, over the 1 KB a file read whole may hold - split it, "
                                    "or send its rows by a step over rows.")
    assert peak < MB


# Names that come from the store


HOSTILE_NAMES = ["../../escape", "..", ".", "", "/tmp/abs-escape", "a/../../b", "..\\..\\win", "x\x00y",
                 ".hidden", "~", "$HOME", "ü" * 300, "a\nb", "con:"]


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.mark.parametrize("table", HOSTILE_NAMES)
def test_the_table_writer_keeps_every_name_inside_out(tmp_path: Path, table: str) -> None:
    out = tmp_path / "deep" / "out"
    before = files_under(tmp_path)
    written = TableWriter(out).write("step1.U.C", {table: [{"a": 1}]}, into="job")
    entry = written[table]
    made = files_under(tmp_path) - before
    job = Path(entry["job"])
    ledger = job.with_name(f".{job.name}.calls")
    assert made == {Path(entry["file"]), job, ledger}
    assert Path(entry["file"]).parent == out / "tables"
    assert job.parent == out
    assert all(not p.name.startswith(".") and "/" not in p.name for p in made - {ledger})
    assert Path(entry["file"]).read_text() == '{"a":1}\n'


class HostileStore(BaseHTTPRequestHandler):
    """Answers every call with tables named like paths out of --out."""

    def do_POST(self) -> None:
        tables = {name: [{"name": name}] for name in HOSTILE_NAMES}
        body = json.dumps({"ok": True, "ms": 1, "data": {"result": True, "message": "here", "detail": {},
                                                         "tables": tables, "files": []}}).encode()
        send_answer(self, 200, "application/json", body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""


@pytest.fixture
def hostile_store() -> Iterator[str]:
    with serve(HostileStore) as url:
        yield url


def test_a_store_that_names_tables_like_paths_writes_nothing_outside_out(hostile_store: str,
                                                                         tmp_path: Path) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    pool = write(work, "pool.yaml", f"pool:\n  - unit: {TEST}\n    command: CmdEcho\n    into: job\n")
    before = files_under(tmp_path)
    proc = pooler("run", str(pool), "--store", hostile_store, "--out", str(work / "out"),
                  "--journal", str(tmp_path / "state" / "j.sqlite"), "--json", cwd=work,
                  env={"POOLER_TOKEN": "any"})
    assert proc.returncode == 0, proc.stderr
    assert answer_of(proc)["steps"][0]["status"] == "completed"
    # The answer omits so big a result; the journal keeps the entry whole.
    with sqlite3.connect(tmp_path / "state" / "j.sqlite") as db:
        tables = json.loads(db.execute("SELECT result FROM calls").fetchone()[0])["tables"]
    assert set(tables) == set(HOSTILE_NAMES)
    made = files_under(tmp_path) - before
    kept = (work / "out", tmp_path / "state")
    outside = {p for p in made if not any(p.is_relative_to(folder) for folder in kept)}
    assert outside == set()
    assert {Path(t["file"]).parent for t in tables.values()} == {work / "out" / "tables"}
    assert {Path(t["job"]).parent for t in tables.values()} == {work / "out"}
    assert not Path("/tmp/abs-escape").exists()


@pytest.mark.parametrize("into", ["../x", "/tmp/x", "a.b"])
def test_into_stays_a_bare_name(store: Store, tmp_path: Path, into: str) -> None:
    pool = write(tmp_path, "pool.json", json.dumps({"pool": [{"unit": TEST, "command": "CmdTable",
                                                              "params": {"rows": 1}, "into": into}]}))
    checked = pooler("check", str(pool))
    assert checked.returncode == 2
    assert "into" in checked.stdout
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == NOT_SENT
    assert store.ops() == []
    assert not (tmp_path / "out").exists()


def test_into_of_a_call_stays_a_bare_name(store: Store, tmp_path: Path) -> None:
    proc = pooler("call", TEST, "CmdTable", "--params", '{"rows": 1}', "--into", "../x", "--store", store.url,
                  "--out", str(tmp_path / "out"), env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("pooler: into is the bare name of a job - '../x' holds a path; write one "
                                   "word with no path and no dots, like photos.")
    assert store.ops() == []


def test_a_symlink_planted_in_out_is_not_followed(store: Store, tmp_path: Path) -> None:
    victim = write(tmp_path, "victim.txt", "keep me\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "job.rows.jsonl").symlink_to(victim)
    pool = write(tmp_path, "pool.yaml", steps("CmdTable", "params: {rows: 2}", "into: job"))
    proc = run(store, tmp_path, pool, "--json")
    assert proc.returncode == 1
    entry = answer_of(proc)["steps"][0]
    assert entry["status"] == "failed"
    assert "its tables could not be written" in entry["message"]
    assert victim.read_text() == "keep me\n"


# The operator's safety nets


@pytest.mark.parametrize("command", ["run", "call", "tools"])
def test_insecure_prints_a_loud_warning_every_time(store: Store, tmp_path: Path, command: str) -> None:
    pool = write(tmp_path, "pool.yaml", f"pool:\n  - unit: {TEST}\n    command: CmdEcho\n")
    out = str(tmp_path / "out")
    args = {"run": ["run", str(pool), "--out", out, "--journal", str(tmp_path / "j.sqlite")],
            "call": ["call", TEST, "CmdEcho", "--out", out],
            "tools": ["tools"]}[command]
    proc = pooler(*args, "--store", store.url, "--insecure", env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 0, proc.stderr
    assert INSECURE_WARNING.startswith("pooler: WARNING: --insecure: the store's TLS certificate is NOT "
                                       "verified")
    assert proc.stderr.startswith(INSECURE_WARNING)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.process
def test_journal_table_job_and_log_files_are_owner_only_whatever_the_umask(store: Store,
                                                                           tmp_path: Path) -> None:
    pool = write(tmp_path, "pool.yaml", steps("CmdTable", "params: {rows: 3}", "into: job"))
    env = environment()
    state = tmp_path / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url,
         "--out", str(tmp_path / "out"), "--journal", str(state / "journal.sqlite"),
         "--log", str(tmp_path / "run.log")],
        capture_output=True, text=True, cwd=ROOT,
        env={**env, "POOLER_TOKEN": store.token, "XDG_STATE_HOME": str(state)}, umask=0,
        timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    files = [state / "journal.sqlite", out / "job.rows.jsonl",
             out / "tables" / "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl", tmp_path / "run.log"]
    files += list(state.glob("journal.sqlite-*"))
    # The pool's lock and the --out's lock.
    locks = list((state / "pooler" / "locks").glob("*.lock"))
    assert len(locks) == 2
    files += locks
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in files} == {
        str(p.relative_to(tmp_path)): "0o600" for p in files}
    folders = [state / "pooler" / "locks", tmp_path / "out", tmp_path / "out" / "tables"]
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in folders} == {
        str(p.relative_to(tmp_path)): "0o700" for p in folders}
