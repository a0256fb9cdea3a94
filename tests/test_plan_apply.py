"""A reviewed plan, applied once: ``pooler plan POOL -o FILE``, ``pooler show FILE`` and ``pooler apply
FILE`` against the real reference store, on both journals where the journal keeps the once-rule."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, environment, pooler
from sharedkit import journal_of

from pooler.mcp.asking import counts
from pooler.pool.compiler import compile_pool
from pooler.pool.loader import load_pool, load_pool_value
from pooler.redact import Redactor
from pooler.run.conflicts import conflicts, from_plan
from pooler.run.plandigests import plan_digests, stale
from pooler.run.savedplan import classes_text, compare_totals, make_head, read_calls, read_head, write_plan

JOURNALS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgresql", id="postgresql")]
GOODS = "sku,name,price\nA-1,Apple,1.50\nB-2,Bread,2.10\nC-3,Cheese,9.90\n"
POOL = """\
vars:
  code: {default: EUR}
  shop_secret: {secret: true}
pool:
  - name: cur
    unit: MELBIS_AGENT_CURRENCY
    command: CmdAdd
    key: currency-${code}
    params: {skey: "${code}", name: Euro}
  - name: goods
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    key: goods-${row.sku}
    for_each: {file: data/goods.csv}
    params: {sku: "${row.sku}", name: "${row.name}", price: "${row.price}", curr_id: "@cur.id"}
"""
SHA = r"[0-9a-f]{12}…"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "goods.csv").write_text(GOODS, encoding="utf-8")
    (tmp_path / "pool.yaml").write_text(POOL, encoding="utf-8")
    return tmp_path


def env(store: Store, **more: str) -> dict[str, str]:
    return {"POOLER_TOKEN": store.token, "POOLER_STORE": store.url, **more}


def plan(store: Store, folder: Path, *extra: str, secret: str = "open-sesame-0123456789") -> Any:
    return pooler("plan", "pool.yaml", "-o", "plan.jsonl", "--var", f"shop_secret={secret}", *extra,
                  env=env(store), cwd=folder)


def apply(store: Store, folder: Path, journal: str, *extra: str,
          secret: str = "open-sesame-0123456789") -> Any:
    return pooler("apply", "plan.jsonl", "--journal", journal, "--out", "out", "--var",
                  f"shop_secret={secret}", *extra, env=env(store), cwd=folder)


def sent(store: Store) -> list[tuple[str, str, dict[str, Any]]]:
    return [(op["unit"], op["command"], op["params"]) for op in store.ops()
            if op["command"] != "CmdOps"]


@pytest.mark.parametrize("kind", JOURNALS)
def test_plan_then_apply_sends_exactly_the_planned_calls_and_a_second_apply_refuses(
        store: Store, folder: Path, kind: str, request: pytest.FixtureRequest) -> None:
    journal = journal_of(kind, request, folder)
    planned = plan(store, folder)
    assert planned.returncode == 0, planned.stderr
    assert sent(store) == []
    head = read_head(folder / "plan.jsonl")
    calls = list(read_calls(folder / "plan.jsonl"))
    assert [(c["step"], c["call"], c.get("rows"), c["key"]) for c in calls] == [
        (1, 1, None, "currency-EUR"), (2, 1, [0], "goods-A-1"), (2, 2, [1], "goods-B-2"),
        (2, 3, [2], "goods-C-3")]
    # Params as far as they are known before the run: the reference waits for its step's answer.
    assert calls[1]["params"] == {"sku": "A-1", "name": "Apple", "price": "1.50", "curr_id": "@cur.id"}
    first = apply(store, folder, journal, "--json")
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["task"] == head["task"]
    assert answer["status"] == "completed"
    done = sent(store)
    assert [(u, c) for u, c, _ in done] == [("MELBIS_AGENT_CURRENCY", "CmdAdd")] + [
        ("MELBIS_AGENT_STORE", "CmdAdd")] * 3
    cur_id = answer["steps"][0]["detail"]["id"]
    # The store tells each call's params as it took them: its defaults filled in (multiplex,
    # division), a price as the float its declaration makes of it.
    assert [{k: p[k] for k in c["params"]} for (_, _, p), c in zip(done, calls, strict=True)] == [
        c["params"] if c["step"] == 1 else
        {**c["params"], "curr_id": cur_id, "price": float(c["params"]["price"])} for c in calls]
    again = apply(store, folder, journal)
    assert again.returncode == 2
    started = re.search(r"was applied at (\S+) as task", again.stderr)
    assert started is not None
    assert again.stderr == (
        f"pooler: plan.jsonl was applied at {started.group(1)} as task {head['task']}: pooler redrive "
        f"{head['task']} sends again what did not land, pooler show {head['task']} tells its answer - a plan "
        "applies once; nothing was sent.\n")
    assert len(sent(store)) == 4
    shown = pooler("show", head["task"], "--journal", journal, "--json", env=env(store), cwd=folder)
    assert json.loads(shown.stdout)["task"] == head["task"]


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_data_file_edited_after_the_plan_refuses_the_apply_and_names_the_file(
        store: Store, folder: Path, kind: str, request: pytest.FixtureRequest) -> None:
    journal = journal_of(kind, request, folder)
    assert plan(store, folder).returncode == 0
    (folder / "data" / "goods.csv").write_text(GOODS + "D-4,Dates,4.00\n", encoding="utf-8")
    refused = apply(store, folder, journal, "--json")
    assert refused.returncode == 2
    assert re.fullmatch(
        r"pooler: plan\.jsonl is stale: data/goods\.csv changed since the plan \(sha256 " + SHA +
        " when planned, " + SHA + r" now\) - nothing was sent; plan again and review the new plan\.\n",
        refused.stderr)
    document = json.loads(refused.stdout)
    assert (document["status"], document["exit"]) == ("refused", 2)
    assert sent(store) == []
    # Put back as it was, the plan is applied as planned.
    (folder / "data" / "goods.csv").write_text(GOODS, encoding="utf-8")
    assert apply(store, folder, journal).returncode == 0
    assert len(sent(store)) == 4


@pytest.mark.parametrize("kind", JOURNALS)
def test_a_plan_made_against_another_store_is_refused_and_sends_nothing(
        store_factory: Any, folder: Path, kind: str, request: pytest.FixtureRequest) -> None:
    journal = journal_of(kind, request, folder)
    planned_on, other = store_factory(), store_factory()
    assert plan(planned_on, folder).returncode == 0
    refused = apply(other, folder, journal)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"pooler: plan.jsonl was planned against the store {planned_on.url}, not {other.url} - nothing was "
        "sent; apply it with --store naming that store, or plan again against this one.\n")
    assert sent(other) == []
    assert sent(planned_on) == []


def test_a_variable_given_again_with_another_value_makes_the_plan_stale(store: Store, folder: Path) -> None:
    assert plan(store, folder, "--var", "code=USD").returncode == 0
    assert read_head(folder / "plan.jsonl")["variables"] == {"code": "USD"}
    refused = apply(store, folder, str(folder / "j.db"), "--var", "code=GBP")
    assert refused.returncode == 2
    assert re.fullmatch(r"pooler: plan\.jsonl is stale: the variable code changed since the plan \(sha256 "
                        + SHA + " when planned, " + SHA + r" now\) - nothing was sent; plan again and review "
                        r"the new plan\.\n", refused.stderr)
    # Not given again, the plan's own value is the one applied.
    assert apply(store, folder, str(folder / "j.db")).returncode == 0
    assert sent(store)[0][2]["skey"] == "USD"


def test_a_plan_never_holds_a_secret_and_names_those_to_give_again(store: Store, folder: Path) -> None:
    secret = "open-sesame-0123456789"
    (folder / "data" / "goods.csv").write_text(GOODS, encoding="utf-8")
    pool = POOL.replace('name: "${row.name}"', 'name: "${row.name} ${shop_secret}"')
    (folder / "pool.yaml").write_text(pool, encoding="utf-8")
    assert plan(store, folder, secret=secret).returncode == 0
    text = (folder / "plan.jsonl").read_text(encoding="utf-8")
    assert secret not in text
    head = read_head(folder / "plan.jsonl")
    assert head["secrets"] == ["shop_secret"]
    assert "shop_secret" not in head["variables"]
    assert [d["name"] for d in head["digests"] if d["what"] == "variable"] == ["code"]
    assert list(read_calls(folder / "plan.jsonl"))[1]["params"]["name"] == "Apple ***"
    missing = pooler("apply", "plan.jsonl", "--journal", str(folder / "j.db"), env=env(store), cwd=folder)
    assert missing.returncode == 2
    assert "shop_secret" in missing.stderr
    assert sent(store) == []
    assert apply(store, folder, str(folder / "j.db"), secret=secret).returncode == 0
    assert sent(store)[1][2]["name"] == f"Apple {secret}"


def test_show_prints_the_summary_and_a_stale_plan_still_shows_with_a_warning(store: Store,
                                                                             folder: Path) -> None:
    assert plan(store, folder).returncode == 0
    head = read_head(folder / "plan.jsonl")
    fresh = pooler("show", "plan.jsonl", env=env(store), cwd=folder)
    assert fresh.returncode == 0
    assert fresh.stderr == ""
    assert fresh.stdout == (
        f"plan plan.jsonl of pool.yaml: 4 calls, planned {head['planned']} against {store.url} as task "
        f"{head['task']}; nothing is sent until it is applied\n"
        "order: sequential: one call at a time, in step order; stops at the first failure\n"
        "steps:\n"
        "  1. cur MELBIS_AGENT_CURRENCY.CmdAdd: 1 call\n"
        "  2. goods MELBIS_AGENT_STORE.CmdAdd: 3 calls\n"
        "secrets to give again at apply: shop_secret\n"
        "apply it once with: pooler apply plan.jsonl\n")
    (folder / "data" / "goods.csv").write_text(GOODS.replace("9.90", "9.95"), encoding="utf-8")
    stale = pooler("show", "plan.jsonl", env=env(store), cwd=folder)
    assert stale.returncode == 0
    assert stale.stdout == fresh.stdout
    assert re.fullmatch(r"pooler: WARNING: the plan is stale, and 'pooler apply' refuses it: data/goods\.csv "
                        r"changed since the plan \(sha256 " + SHA + " when planned, " + SHA + r" now\)\n",
                        stale.stderr)
    as_json = json.loads(pooler("show", "plan.jsonl", "--json", env=env(store), cwd=folder).stdout)
    assert as_json["file"] == "plan.jsonl"
    assert as_json["task"] == head["task"]
    assert as_json["calls"] == 4
    assert as_json["plan"]["calls"] == 4
    assert as_json["plan"]["variables"]["shop_secret"] == {"value": "***", "description": "", "secret": True}
    assert as_json["steps"] == [
        {"num": 1, "name": "cur", "unit": "MELBIS_AGENT_CURRENCY", "command": "CmdAdd", "calls": 1},
        {"num": 2, "name": "goods", "unit": "MELBIS_AGENT_STORE", "command": "CmdAdd", "calls": 3}]
    assert len(as_json["stale"]) == 1
    assert as_json["stale"][0].startswith("data/goods.csv changed since the plan (sha256 ")


def test_show_markdown_is_a_summary_fit_for_a_pull_request(store: Store, folder: Path) -> None:
    assert plan(store, folder).returncode == 0
    head = read_head(folder / "plan.jsonl")
    digests = {d["what"]: d["sha256"][:12] for d in head["digests"]}
    shown = pooler("show", "plan.jsonl", "--markdown", env=env(store), cwd=folder)
    assert shown.returncode == 0
    assert shown.stdout == (
        "### pooler plan `pool.yaml`\n\n"
        f"4 calls, planned {head['planned']} against `{store.url}` as task `{head['task']}`. Nothing is sent "
        "until it is applied.\n\n"
        "| # | step | unit.command | calls |\n"
        "|---:|---|---|---:|\n"
        "| 1 | cur | MELBIS_AGENT_CURRENCY.CmdAdd | 1 |\n"
        "| 2 | goods | MELBIS_AGENT_STORE.CmdAdd | 3 |\n\n"
        "Secrets to give again at apply: `shop_secret`.\n\n"
        "<details><summary>What it was planned from (sha256)</summary>\n\n"
        f"- the pool file pool.yaml: `{digests['pool']}`\n"
        f"- the steps (with their pool_source and params_source files): `{digests['steps']}`\n"
        f"- the options: `{digests['options']}`\n"
        f"- data/goods.csv: `{digests['data']}`\n"
        f"- the variable code: `{digests['variable']}`\n"
        f"- the store's declarations: `{digests['declarations']}`\n\n"
        "</details>\n\n"
        "Apply it once with `pooler apply plan.jsonl`.\n")
    (folder / "pool.yaml").write_text(POOL + "# edited\n", encoding="utf-8")
    stale = pooler("show", "plan.jsonl", "--markdown", env=env(store), cwd=folder)
    assert re.search(r"\n> \*\*Stale:\*\* `pooler apply` refuses this plan: the pool file pool\.yaml changed "
                     r"since the plan \(sha256 " + SHA + " when planned, " + SHA + r" now\)\.\n",
                     stale.stdout)


def test_the_options_of_the_plan_are_the_options_applied(store: Store, folder: Path) -> None:
    assert plan(store, folder, "--mode", "parallel", "--max-concurrency", "2").returncode == 0
    assert read_head(folder / "plan.jsonl")["options"] == {"mode": "parallel", "max_concurrency": 2}
    applied = apply(store, folder, str(folder / "j.db"), "--json")
    assert applied.returncode == 0, applied.stderr
    assert len(sent(store)) == 4


def test_a_file_that_is_no_plan_is_refused_with_its_place(store: Store, folder: Path) -> None:
    (folder / "plan.jsonl").write_text("pool: []\n", encoding="utf-8")
    refused = apply(store, folder, str(folder / "j.db"))
    assert refused.returncode == 2
    assert refused.stderr == ("plan.jsonl:1:1: not a plan file (its first line is no JSON object) - a plan "
                              "file is what 'pooler plan POOL -o FILE' writes.\n")
    assert "Traceback" not in refused.stderr


def test_a_plan_whose_calls_were_edited_by_hand_is_refused(store: Store, folder: Path) -> None:
    assert plan(store, folder).returncode == 0
    path = folder / "plan.jsonl"
    path.write_text(path.read_text(encoding="utf-8").replace('"A-1"', '"Z-9"'), encoding="utf-8")
    refused = apply(store, folder, str(folder / "j.db"))
    assert refused.returncode == 2
    assert refused.stderr == ("pooler: plan.jsonl was edited since 'pooler plan' wrote it: its calls are not "
                              "those its head counts - nothing was sent; plan again.\n")
    assert sent(store) == []


def test_calls_of_a_step_without_compare_are_never_conflicts() -> None:
    # A call of a step without compare: keeps no store values: nothing to read again, no conflict.
    calls = [{"step": 2, "call": 1, "rows": [0], "key": "goods-A-1", "params": {}}]
    assert from_plan(calls, [{"num": 2, "calls": 1}]) == ({}, {})
    assert conflicts(calls, {2: {0: "row 0 (sku A-1): moved in the store since the plan"}}) == []


@pytest.mark.process
@pytest.mark.parametrize("kind", JOURNALS)
def test_two_applies_of_one_plan_at_once_send_its_calls_once(store: Store, folder: Path, kind: str,
                                                             request: pytest.FixtureRequest) -> None:
    journal = journal_of(kind, request, folder)
    assert plan(store, folder).returncode == 0
    argv = [sys.executable, "-m", "pooler", "apply", "plan.jsonl", "--journal", journal, "--out", "out",
            "--var", "shop_secret=open-sesame-0123456789"]
    both = [subprocess.Popen(argv, cwd=folder, env=environment(env(store)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    ended = sorted((proc.wait(timeout=120), proc.stderr.read() if proc.stderr else "") for proc in both)
    for proc in both:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert ended[0][0] == 0, ended
    # The other found the plan applied, or (one host, one journal file) its pool's run lock held.
    assert ended[1][0] in (2, 3), ended
    if ended[1][0] == 2:
        assert "as task " in ended[1][1]
        assert ended[1][1].endswith("a plan applies once; nothing was sent.\n")
    assert len(sent(store)) == 4


def test_the_stores_declarations_make_a_plan_stale_only_for_the_units_it_calls(folder: Path) -> None:
    pool = load_pool(folder / "pool.yaml")
    tools = [{"unit": "MELBIS_AGENT_STORE", "commands": [{"name": "CmdAdd", "fields": []}]},
             {"unit": "MELBIS_AGENT_TEST", "commands": [{"name": "CmdEcho", "fields": []}]}]
    then = plan_digests(pool, {"code": "EUR"}, tools=tools)
    other = [tools[0], {"unit": "MELBIS_AGENT_TEST", "commands": []}]
    assert stale(then, plan_digests(pool, {"code": "EUR"}, tools=other)) == []
    changed = [{"unit": "MELBIS_AGENT_STORE", "commands": []}, tools[1]]
    told = stale(then, plan_digests(pool, {"code": "EUR"}, tools=changed))
    assert len(told) == 1
    assert re.fullmatch(r"the store's declarations changed since the plan \(sha256 " + SHA + " when planned, "
                        + SHA + r" now\)", told[0])
    # Not asked (pooler show reads no store): not told as changed.
    assert stale(then, plan_digests(pool, {"code": "EUR"})) == []


def test_a_chunked_step_plans_a_call_a_chunk_with_its_rows_and_an_unknown_step_over_a_table(
        store: Store, folder: Path) -> None:
    (folder / "pool.yaml").write_text("""\
pool:
  - name: imp
    unit: MELBIS_AGENT_IMPORT_GOODS
    command: CmdAdd
    key: import-${row.sku}
    for_each: {file: data/goods.csv, chunk: 2, field: goods}
    chunk_row: {ref: "${row.sku}", sku: "${row.sku}", name: "${row.name}", price: "${row.price}"}
  - name: echo
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    for_each: {step: imp, table: goods}
    params: {id: "${row.id}"}
""", encoding="utf-8")
    planned = pooler("plan", "pool.yaml", "-o", "plan.jsonl", env=env(store), cwd=folder)
    assert planned.returncode == 0, planned.stderr
    calls = list(read_calls(folder / "plan.jsonl"))
    assert [(c["step"], c["rows"]) for c in calls] == [(1, [0, 1]), (1, [2, 2])]
    assert calls[0]["key"].startswith("import-A-1")
    assert calls[0]["params"] == {"goods": [
        {"ref": "A-1", "sku": "A-1", "name": "Apple", "price": "1.50"},
        {"ref": "B-2", "sku": "B-2", "name": "Bread", "price": "2.10"}]}
    head = read_head(folder / "plan.jsonl")
    assert head["calls"] is None
    assert [s["calls"] for s in head["steps"]] == [2, None]
    assert "  2. echo MELBIS_AGENT_TEST.CmdEcho: ? calls\n" in planned.stdout
    applied = pooler("apply", "plan.jsonl", "--journal", str(folder / "j.db"), "--out", "out", env=env(store),
                     cwd=folder)
    assert applied.returncode == 0, applied.stderr
    assert [c for _, c, _ in sent(store)] == ["CmdAdd", "CmdAdd", "CmdEcho", "CmdEcho", "CmdEcho"]


def test_a_data_file_two_steps_read_is_digested_once_and_told_once(folder: Path) -> None:
    text = POOL + "  - {unit: MELBIS_AGENT_TEST, command: CmdEcho, for_each: {file: data/goods.csv}}\n"
    (folder / "pool.yaml").write_text(text, encoding="utf-8")
    pool = load_pool(folder / "pool.yaml")
    then = plan_digests(pool, {"code": "EUR"})
    assert [d["name"] for d in then if d["what"] == "data"] == ["data/goods.csv"]
    assert stale(then, plan_digests(pool, {"code": "EUR"})) == []
    (folder / "data" / "goods.csv").write_text(GOODS + "D-4,Dates,4.00\n", encoding="utf-8")
    told = stale(then, plan_digests(pool, {"code": "EUR"}))
    assert len(told) == 1
    assert told[0].startswith("data/goods.csv changed since the plan (sha256 ")


def test_a_plan_whose_head_lacks_what_every_plan_holds_is_refused(store: Store, folder: Path) -> None:
    (folder / "plan.jsonl").write_text('{"pooler_plan": 1, "task": "t"}\n', encoding="utf-8")
    refused = pooler("show", "plan.jsonl", env=env(store), cwd=folder)
    assert refused.returncode == 2
    assert refused.stderr == ("plan.jsonl:1:1: not a whole plan (its first line lacks pool, planned, "
                              "digests, calls_sha256, steps) - a plan file is what 'pooler plan POOL -o "
                              "FILE' writes.\n")
    markdown = pooler("show", "20261206-055309-67cdef", "--markdown", env=env(store), cwd=folder)
    assert markdown.returncode == 2
    assert markdown.stderr == ("pooler: --markdown shows a plan file ('pooler show FILE --markdown'), not a "
                               "task.\n")


def test_each_call_carries_its_compare_class_and_show_counts_them_per_step(folder: Path) -> None:
    # The classes come from the compare reader; here a stand-in gives each row's class by its sku.
    classes = {"A-1": "new", "B-2": "changed", "C-3": "unchanged"}

    def classify(step: Any, call: Any) -> str | None:
        return classes[call["params"]["sku"]] if step.num == 2 else None

    pool = load_pool(folder / "pool.yaml")
    compiled = compile_pool(pool, values={"code": "EUR", "shop_secret": "open-sesame-0123456789"})
    digests = plan_digests(pool, compiled.variables.values if compiled.variables else {})
    head = make_head(compiled, task="t-1", pool="pool.yaml", store=None, options={}, digests=digests,
                     redactor=Redactor())
    write_plan(folder / "plan.jsonl", head, compiled, Redactor(), classify)
    calls = list(read_calls(folder / "plan.jsonl"))
    assert [c.get("compare") for c in calls] == [None, "new", "changed", "unchanged"]
    assert read_head(folder / "plan.jsonl")["steps"][1]["compare"] == {"new": 1, "changed": 1, "unchanged": 1}
    shown = pooler("show", "plan.jsonl", cwd=folder)
    assert "  2. goods MELBIS_AGENT_STORE.CmdAdd: 3 calls (1 new, 1 changed, 1 unchanged)\n" in shown.stdout
    markdown = pooler("show", "plan.jsonl", "--markdown", cwd=folder).stdout
    assert ("| # | step | unit.command | calls | new | changed | unchanged |\n"
            "|---:|---|---|---:|---:|---:|---:|\n"
            "| 1 | cur | MELBIS_AGENT_CURRENCY.CmdAdd | 1 |  |  |  |\n"
            "| 2 | goods | MELBIS_AGENT_STORE.CmdAdd | 3 | 1 | 1 | 1 |\n") in markdown


def test_a_sampled_plan_applies_its_sample_alone(store: Store, folder: Path) -> None:
    assert plan(store, folder, "--sample", "2").returncode == 0
    head = read_head(folder / "plan.jsonl")
    assert head["sample"] == 2
    assert [(s["num"], s["calls"]) for s in head["steps"]] == [(1, 1), (2, 2)]
    applied = apply(store, folder, str(folder / "j.db"), "--json")
    assert applied.returncode == 0, applied.stderr
    assert [p.get("sku") for _, _, p in sent(store)] == [None, "A-1", "B-2"]


def test_an_agent_confirms_a_long_plan_by_its_compare_classes_too(tmp_path: Path) -> None:
    pool = load_pool_value({"pool": [{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}] * 60},
                           file="tool_pool", base=tmp_path)
    steps = [{"num": 1, "compare": {"new": 12, "changed": 40, "unchanged": 99948}},
             {"num": 2, "compare": {"new": 0, "changed": 1, "unchanged": 0}}, {"num": 3}]
    totals = compare_totals(steps)
    assert totals == {"new": 12, "changed": 41, "unchanged": 99948}
    assert compare_totals([{"num": 1}]) is None
    asked = counts(compile_pool(pool, values={}), "plan-1", classes_text(totals))
    assert asked.message == ("60 calls (12 new, 41 changed, 99,948 unchanged): 60 MELBIS_AGENT_TEST.CmdEcho "
                             "- the plan plan-1, to be sent to the store. confirm true sends them; false (or "
                             "decline) ends the task with nothing sent, the plan still planned.")
    assert counts(compile_pool(pool, values={}), "plan-1").message.startswith(
        "60 calls: 60 MELBIS_AGENT_TEST.CmdEcho - ")
