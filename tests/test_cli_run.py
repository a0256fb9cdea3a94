"""``pooler run`` as a real process against the real reference store."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Store, answer_of, environment, pooler, wait_for_ops

from pooler.cli.commands import run as run_command
from pooler.cli.main import main
from pooler.errors import JournalError
from pooler.run.executor import run_plan

POOLS = ROOT / "pools"
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d (.*)$")


def run(store: Store, tmp_path: Path, pool: Path | str, *extra: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token, **(env or {})})


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_seed_currency_pool_gives_the_seed_answer(store: Store, tmp_path: Path) -> None:
    proc = run(store, tmp_path, POOLS / "currency.json", "--json")
    assert proc.returncode == 0, proc.stderr
    answer = answer_of(proc)
    assert list(answer)[:7] == ["result", "status", "total", "succeeded", "failed", "skipped", "not_run"]
    assert answer["result"] is True
    assert answer["status"] == "completed"
    assert (answer["total"], answer["succeeded"], answer["failed"]) == (2, 2, 0)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", answer["task"])
    assert set(answer["time"]) == {"trip"}
    first, second = answer["steps"]
    assert {k: first[k] for k in ("num", "name", "unit", "command", "status", "key", "result")} == {
        "num": 1, "name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd",
        "status": "completed", "key": None, "result": True}
    assert isinstance(first["detail"]["id"], int)
    assert first["tables"] == {}
    assert first["files"] == []
    assert {"server", "module", "trip"} <= set(first["time"])
    assert (second["num"], second["name"], second["command"]) == (2, "", "CmdPos")
    # The reference reached the store as the number step 1 answered.
    ops = store.ops()
    assert [op["command"] for op in ops] == ["CmdAdd", "CmdPos"]
    assert ops[1]["params"]["data"] == [{"id": first["detail"]["id"]}]


def test_json_is_one_document_and_people_text_goes_to_stderr(store: Store, tmp_path: Path) -> None:
    proc = run(store, tmp_path, POOLS / "currency.json", "--json")
    json.loads(proc.stdout)  # exactly one document: nothing else on stdout
    lines = proc.stderr.splitlines()
    assert all(LINE.match(line) for line in lines), proc.stderr
    bodies = [LINE.match(line).group(1) for line in lines]  # type: ignore[union-attr]
    assert re.fullmatch(r"pool \S+currency\.json task \S+: 2 calls planned", bodies[0])
    assert re.fullmatch(r"call 1/2 step 1 cur MELBIS_AGENT_CURRENCY\.CmdAdd completed \d+ ms", bodies[1])
    assert re.fullmatch(r"call 2/2 step 2 MELBIS_AGENT_CURRENCY\.CmdPos completed \d+ ms", bodies[2])
    assert re.fullmatch(r"pool completed: 2 calls: 2 succeeded, 0 failed, 0 skipped, 0 in doubt, 0 not run "
                        r"in \d+ ms", bodies[3])


def test_without_json_the_plain_lines_go_to_stdout(store: Store, tmp_path: Path) -> None:
    proc = run(store, tmp_path, POOLS / "currency.json")
    assert proc.returncode == 0
    assert proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 4
    assert all(LINE.match(line) for line in proc.stdout.splitlines())
    assert "\x1b[" not in proc.stdout  # no colours or cursor moves without a terminal


def test_a_failed_step_stops_the_pool_and_exits_1(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "fail.yaml", """\
pool:
  - {name: a, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 1}}
  - {name: b, unit: MELBIS_AGENT_TEST, command: CmdFail}
  - {name: c, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 3}}
""")
    proc = run(store, tmp_path, pool, "--json")
    assert proc.returncode == 1, proc.stderr
    answer = answer_of(proc)
    assert (answer["result"], answer["status"]) == (False, "partial")
    assert (answer["succeeded"], answer["failed"], answer["not_run"]) == (1, 1, 1)
    assert [s["status"] for s in answer["steps"]] == ["completed", "failed"]
    assert [op["command"] for op in store.ops()] == ["CmdEcho", "CmdFail"]
    assert re.search(r"call 2/3 step 2 b MELBIS_AGENT_TEST\.CmdFail failed \d+ ms: \S", proc.stderr)
    assert f"to continue: --task {answer['task']} --resume" in proc.stderr


def test_no_stop_on_error_flag_overrides_the_file(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "go-on.yaml", """\
stop_on_error: true
pool:
  - {unit: MELBIS_AGENT_TEST, command: CmdFail}
  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 2}}
""")
    proc = run(store, tmp_path, pool, "--json", "--no-stop-on-error")
    assert proc.returncode == 1
    assert [s["status"] for s in answer_of(proc)["steps"]] == ["failed", "completed"]
    assert f"pooler: --stop-on-error False overrides stop_on_error: True of {pool}" in proc.stderr


def test_a_refused_pool_sends_nothing_and_exits_2(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "refused.yaml", """\
pool:
  - {name: a, unit: MELBIS_AGENT_TEST, command: CmdEcho}
  - {name: a.b, unit: MELBIS_AGENT_TEST, command: CmdEcho}
""")
    proc = run(store, tmp_path, pool, "--json")
    assert proc.returncode == 2
    # --json: the refusal is one document too, with each problem's place.
    refusal = json.loads(proc.stdout)
    assert {k: refusal[k] for k in ("result", "status", "exit", "exit_meaning")} == {
        "result": False, "status": "refused", "exit": 2, "exit_meaning": "refused before anything was sent"}
    assert refusal["problems"][0]["file"] == str(pool)
    assert refusal["problems"][0]["line"] == 3
    assert isinstance(refusal["problems"][0]["column"], int)
    assert refusal["problems"][0]["message"].startswith("The name of step 2 carries a dot")
    assert "The name of step 2 carries a dot" in proc.stderr
    assert re.search(r"refused\.yaml:3:\d+: ", proc.stderr)
    assert re.search(r"\n\s+3 \| .*a\.b.*\n\s+\| +\^", proc.stderr), proc.stderr
    assert proc.stderr.rstrip().endswith("pooler: refused before the first step; nothing was sent.")
    assert store.ops() == []


def test_a_pool_refused_for_a_missing_data_file_leaves_no_running_task(store: Store,
                                                                       tmp_path: Path) -> None:
    pool = write(tmp_path, "rows.yaml", """\
pool:
  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: "${row.n}"}, for_each: {file: rows.csv}}
""")
    proc = run(store, tmp_path, pool, "--json")
    assert proc.returncode == 2, proc.stderr
    assert f"No such file: {tmp_path / 'rows.csv'}" in proc.stderr
    journal = str(tmp_path / "journal.sqlite")
    # Refused while compiling, before the journal is opened: no journal, so no task in it.
    assert not Path(journal).exists() or answer_of(pooler("runs", "--journal", journal, "--json")) == {
        "tasks": []}
    (tmp_path / "rows.csv").write_text("n\n1\n", encoding="utf-8")
    resumed = answer_of(run(store, tmp_path, pool, "--json", "--resume"))
    assert resumed["result"] is True
    tasks = answer_of(pooler("runs", "--journal", journal, "--json"))["tasks"]
    assert [(t["id"], t["status"], t["runs"]) for t in tasks] == [(resumed["task"], "completed", 1)]


def test_the_engine_acts_on_the_stores_own_answer_and_masks_what_it_writes(store: Store,
                                                                           tmp_path: Path) -> None:
    """A secret that happens to be a word of the answer's shape (here "tables") is masked in what
    is written, but the run still sees the store's answer whole: its table is written."""
    pool = write(tmp_path, "table.yaml", """\
vars:
  word: {env: POOL_WORD, secret: true}
pool:
  - {unit: MELBIS_AGENT_TEST, command: CmdTable, key: "t-${word}", params: {rows: 2, width: 3}}
""")
    proc = run(store, tmp_path, pool, "--json", env={"POOL_WORD": "tables"})
    assert proc.returncode == 0, proc.stderr
    written = tmp_path / "out" / "tables" / "step1.MELBIS_AGENT_TEST.CmdTable.rows.jsonl"
    assert [json.loads(line)["n"] for line in written.read_text(encoding="utf-8").splitlines()] == [1, 2]
    assert answer_of(proc)["steps"][0]["key"] == "t-***"


def test_a_missing_variable_and_a_bad_option_are_told_together(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "two.yaml", """\
vars:
  sku: {description: the product}
mode: sequential
serialize_on: contract
pool:
  - {unit: MELBIS_AGENT_STORE, command: CmdGet, params: {sku: "${sku}"}}
""")
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 2
    assert "The variable [sku] has no value - give it with --var sku=VALUE" in proc.stderr
    assert "serialize_on" in proc.stderr
    assert re.search(r"pooler: \d+ problems", proc.stderr)
    assert store.ops() == []


def test_no_store_exits_2_and_says_how_to_give_one(tmp_path: Path) -> None:
    proc = pooler("run", str(POOLS / "currency.json"), "--journal", str(tmp_path / "j.sqlite"),
                  env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert (f"pooler: no store given: pass --store URL (or the name of a store from "
            f"{tmp_path}/pooler/stores.yaml), or set POOLER_STORE") in proc.stderr


def test_dry_run_shows_the_plan_and_sends_nothing(store: Store, tmp_path: Path) -> None:
    proc = run(store, tmp_path, POOLS / "import.yaml", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"dry run of {POOLS / 'import.yaml'}: ? calls, nothing is sent\n")
    assert "order: sequential: one call at a time, in step order; stops at the first failure" in out
    assert re.search(r"1\. add MELBIS_AGENT_STORE\.CmdAdd: 1,200 calls; 1,200 rows of data/goods\.csv; "
                     r"key goods-\$\{row\.sku\} \(first: goods-TEA-0001\)", out), out
    assert ("3. report MELBIS_AGENT_TEST.CmdEcho: ? calls; ? rows of table goods of step catalogue, "
            "500 a call as goods; waits for catalogue (order); refs catalogue") in out
    assert store.ops() == []
    assert not (tmp_path / "out").exists()


def test_dry_run_json_masks_secrets_and_counts_sampled_rows(store: Store, tmp_path: Path) -> None:
    proc = run(store, tmp_path, POOLS / "vars.yaml", "--dry-run", "--json",
               env={"SHOP_SIGNATURE": "sig-dry-run-7"})
    assert proc.returncode == 0, proc.stderr
    plan = answer_of(proc)
    assert plan["dry_run"] is True
    assert plan["variables"]["signature"] == {
        "value": "***", "secret": True,
        "description": "the shop's signing secret, from the environment variable SHOP_SIGNATURE"}
    assert plan["variables"]["rate"]["value"] == 0.93
    assert plan["steps"][0]["key"] == {"template": "currency-${currency}", "per_row": False,
                                       "value": "currency-CHF"}
    assert plan["steps"][1]["waits_for"] == ["cur"]
    assert "sig-dry-run-7" not in proc.stdout + proc.stderr
    sampled = answer_of(run(store, tmp_path, POOLS / "import-chunked.yaml", "--dry-run", "--json",
                            "--sample", "700"))
    assert sampled["steps"][0]["calls"] == 2
    assert sampled["steps"][0]["rows"]["count"] == 700
    assert store.ops() == []


def test_quiet_prints_nothing_on_success_and_the_failure_otherwise(store: Store, tmp_path: Path) -> None:
    ok = run(store, tmp_path, POOLS / "currency.json", "--quiet")
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")
    pool = write(tmp_path, "fail.yaml", "pool:\n  - {name: x, unit: MELBIS_AGENT_TEST, command: CmdFail}\n")
    bad = run(store, tmp_path, pool, "--quiet")
    assert bad.returncode == 1
    lines = [LINE.match(line).group(1) for line in bad.stdout.splitlines()]  # type: ignore[union-attr]
    assert len(lines) == 2
    assert re.fullmatch(r"call 1/1 step 1 x MELBIS_AGENT_TEST\.CmdFail failed \d+ ms: .+", lines[0])
    assert lines[1].startswith("pool failed: 1 call: 0 succeeded, 1 failed")


def test_log_appends_plain_lines_run_after_run(store: Store, tmp_path: Path) -> None:
    log = tmp_path / "cron.log"
    for _ in range(2):
        assert run(store, tmp_path, POOLS / "currency.json", "--quiet", "--log", str(log)).returncode == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 8
    assert all(LINE.match(line) for line in lines)
    assert sum(" pool completed: " in line for line in lines) == 2
    assert oct(log.stat().st_mode & 0o777) == "0o600"


def test_resume_skips_keyed_calls_already_done(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "keyed.yaml", """\
vars:
  fail: {default: true}
pool:
  - {name: a, unit: MELBIS_AGENT_CURRENCY, command: CmdAdd, key: eur, params: {skey: EUR, name: Euro}}
  - {name: b, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {fail: "${fail}"}}
  - {name: c, unit: MELBIS_AGENT_TEST, command: CmdFail}
""")
    first = answer_of(run(store, tmp_path, pool, "--json", "--task", "nightly-1"))
    assert first["task"] == "nightly-1"
    again = run(store, tmp_path, pool, "--json", "--task", "nightly-1", "--resume")
    assert again.returncode == 1
    statuses = [s["status"] for s in answer_of(again)["steps"]]
    assert statuses == ["skipped", "completed", "failed"]
    assert [op["command"] for op in store.ops()].count("CmdAdd") == 1


def test_insecure_warns_loudly(store: Store, tmp_path: Path) -> None:
    proc = run(store, tmp_path, POOLS / "currency.json", "--insecure", "--json")
    assert proc.returncode == 0
    assert "pooler: WARNING: --insecure: the store's TLS certificate is NOT verified" in proc.stderr


def test_an_unreachable_store_fails_the_step_and_exits_1(tmp_path: Path) -> None:
    proc = pooler("run", str(POOLS / "currency.json"), "--store", "http://127.0.0.1:9", "--json",
                  "--journal", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "out"),
                  env={"POOLER_TOKEN": "demo"})
    assert proc.returncode == 1
    answer = answer_of(proc)
    assert answer["steps"][0]["status"] == "failed"
    assert "cannot reach the store at http://127.0.0.1:9/" in answer["steps"][0]["message"]


def start_run(store: Store, tmp_path: Path, pool: Path) -> subprocess.Popen[str]:
    env = environment()
    env["POOLER_TOKEN"] = store.token
    return subprocess.Popen(
        [sys.executable, "-m", "pooler", "run", str(pool), "--store", store.url, "--json",
         "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "journal.sqlite")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)


@pytest.mark.process
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_new_calls_and_prints_the_partial_answer(
        store_factory: Any, tmp_path: Path, signum: int, status: int) -> None:
    store: Store = store_factory("--latency-ms", "200")
    pool = write(tmp_path, "long.yaml", "pool:\n" + "".join(
        f"  - {{unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {{n: {n}}}}}\n" for n in range(20)))
    proc = start_run(store, tmp_path, pool)
    wait_for_ops(store, 1, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    answer = json.loads(out)
    name = signal.Signals(signum).name
    assert answer["interrupted"] == name
    assert answer["result"] is False
    assert 1 <= answer["succeeded"] < 20
    assert answer["succeeded"] + answer["not_run"] == 20
    assert f"pooler: {name}: no new calls start; the calls in flight finish" in err
    assert len(store.ops()) == answer["succeeded"]
    # The journal keeps the same answer: the signal's name, not only that the run was stopped.
    shown = pooler("show", answer["task"], "--journal", str(tmp_path / "journal.sqlite"), "--json")
    assert answer_of(shown)["interrupted"] == name


def read_until(proc: subprocess.Popen[str], text: str) -> None:
    """Read the run's stderr line by line until one holds ``text``."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"never saw {text!r} in {seen}")


@pytest.mark.process
def test_a_second_signal_leaves_at_once(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "sleepy.yaml", """\
pool:
  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {n: 0}}
  - {unit: MELBIS_AGENT_TEST, command: CmdSleep, params: {ms: 20000}}
""")
    proc = start_run(store, tmp_path, pool)
    try:
        # Step 2 leaves as soon as step 1 is reported: the 20 s call is in flight.
        read_until(proc, "call 1/2 ")
        proc.send_signal(signal.SIGINT)
        read_until(proc, "SIGINT: no new calls start")
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert time.monotonic() - started < 10  # it did not wait for the 20 s call


def test_an_error_after_calls_left_is_a_stopped_pool_not_a_refusal(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = run_plan

    def journal_dies_at_the_end(*args: Any, **kwargs: Any) -> dict[str, Any]:
        real(*args, **kwargs)
        raise JournalError("the journal j.sqlite failed: disk I/O error")

    monkeypatch.setattr(run_command, "run_plan", journal_dies_at_the_end)
    out, err = io.StringIO(), io.StringIO()
    status = main(["run", str(POOLS / "currency.json"), "--store", store.url, "--out", str(tmp_path / "out"),
                   "--journal", str(tmp_path / "j.sqlite")], stdout=out, stderr=err,
                  environ=environment({"POOLER_TOKEN": store.token}))
    assert status == 1
    assert err.getvalue() == (
        "pooler: the journal j.sqlite failed: disk I/O error\n"
        "pooler: the run stopped after 2 calls had been sent; "
        f"'pooler runs --journal {tmp_path / 'j.sqlite'}' lists the task.\n")
    assert len(store.ops()) == 2


def test_a_run_keeps_its_journal_and_lock_in_the_home_folder_of_the_environment_it_was_given(
        store: Store, tmp_path: Path) -> None:
    home = tmp_path / "home"
    environ = {"HOME": str(home), "POOLER_TOKEN": store.token}
    out, err = io.StringIO(), io.StringIO()
    status = main(["run", str(POOLS / "currency.json"), "--store", store.url, "--out", str(tmp_path / "out")],
                  stdout=out, stderr=err, environ=environ)
    assert status == 0, err.getvalue()
    state = home / ".local" / "state" / "pooler"
    assert (state / "journal.sqlite").is_file()
    # One lock for the pool file, one for the --out folder.
    assert [p.suffix for p in (state / "locks").iterdir()] == [".lock", ".lock"]
    # Without a store, the config it names is the one of that home folder too.
    status = main(["run", str(POOLS / "currency.json")], stdout=out, stderr=err, environ={"HOME": str(home)})
    assert status == 2
    assert f"{home}/.config/pooler/stores.yaml" in err.getvalue()
