"""One plan for check, dry-run and run: each pool below was once passed by ``pooler check`` and then
refused or broken by ``pooler run`` after its first call.  Now check, ``run --dry-run`` and ``run``
build the same plan, so they agree, and run sends nothing when it refuses.  All through the real
``pooler`` command against the reference store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, Store, answer_of, pooler

ECHO = "unit: MELBIS_AGENT_TEST, command: CmdEcho"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


SKU_NAME = 'params: {sku: "${row.sku}", name: "${row.name}"}'


def over(tmp_path: Path, name: str, file: str, options: str = "") -> Path:
    """A pool of one step over the rows of ``file``, sending each row's sku and name."""
    return write(tmp_path, name, f"pool:\n  - {{{ECHO}, {SKU_NAME}, for_each: {{file: {file}{options}}}}}\n")


def ran_with(store: Store, tmp_path: Path, pool: Path, sent: dict[str, str]) -> None:
    """check --data passes the pool, run sends it, and the store received ``sent``."""
    assert pooler("check", str(pool), "--data").returncode == 0
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 0, proc.stderr
    assert store.ops()[0]["params"] == sent


def run(store: Store, tmp_path: Path, pool: Path, *extra: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token, **(env or {})})


def refused_unsent(store: Store, tmp_path: Path, pool: Path, *extra: str) -> str:
    """Run the pool, which must be refused before anything is sent; what it printed."""
    proc = run(store, tmp_path, pool, *extra)
    assert proc.returncode == 2, proc.stderr
    # With --json the refusal is a document too: no answer, the outcome and its problems.
    document = json.loads(proc.stdout)
    assert (document["result"], document["status"], document["exit"]) == (False, "refused", 2)
    assert document["problems"]
    assert "pooler: refused before the first step; nothing was sent." in proc.stderr
    assert "Traceback" not in proc.stderr
    assert store.ops() == []
    return proc.stderr


def test_an_into_with_a_plus_is_refused_by_check_and_run_alike(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "into.yaml", "pool:\n  - {unit: MELBIS_AGENT_CURRENCY, command: CmdList, "
                                        'into: "rates+eur"}\n')
    expected = (f"{pool}:2:59: into is the bare name of a job - [rates+eur] holds '+'; use only letters, "
                "digits, _ and -.")
    check = pooler("check", str(pool))
    assert check.returncode == 2
    assert check.stdout.splitlines()[0] == expected
    assert refused_unsent(store, tmp_path, pool).splitlines()[0] == expected


def test_a_reference_reads_an_objects_key_0_and_a_lists_index_0(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "refs.yaml", f"""\
pool:
  - {{name: one, {ECHO}, params: {{m: {{"0": a, "1": b}}, l: [c, d], deep: {{"1": [e, {{"0": f}}]}}}}}}
  - {{{ECHO}, params: {{x: "@one.m.0", y: "@one.m.1", z: "@one.l.0", w: "@one.deep.1.1.0"}}}}
""")
    assert pooler("check", str(pool)).returncode == 0
    proc = run(store, tmp_path, pool)
    assert proc.returncode == 0, proc.stderr
    assert answer_of(proc)["steps"][1]["detail"] == {"x": "a", "y": "b", "z": "c", "w": "f"}


def test_a_missing_data_file_is_refused_by_check_dry_run_and_run(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "missing.yaml",
                 f'pool:\n  - {{{ECHO}, params: {{n: "${{row.n}}"}}, '
                 'for_each: {file: data/missing.csv}}\n')
    expected = (f"{pool}:2:91: No such file: {tmp_path / 'data' / 'missing.csv'} - for_each.file of step 1 "
                "is read relative to the pool file's folder.")
    check = pooler("check", str(pool))
    assert (check.returncode, check.stdout.splitlines()[0]) == (2, expected)
    dry = pooler("run", str(pool), "--dry-run")
    assert (dry.returncode, dry.stderr.splitlines()[0]) == (2, expected)
    assert refused_unsent(store, tmp_path, pool).splitlines()[0] == expected


DATED = f"""\
vars:
  date: {{description: the feed's day}}
pool:
  - {{{ECHO}, params: {{sku: "${{row.sku}}"}}, key: "feed-${{date}}-${{row.sku}}",
     for_each: {{file: "feeds/${{date}}.csv"}}}}
"""


def test_a_data_files_path_fills_variables(store: Store, tmp_path: Path) -> None:
    pool = write(tmp_path, "dated.yaml", DATED)
    write(tmp_path, "feeds/2026-12-01.csv", "sku,name\nA,x\nB,y\n")
    assert pooler("check", str(pool), "--var", "date=2026-12-01", "--data").stdout == "1 file valid\n"
    wrong = pooler("check", str(pool), "--var", "date=2026-12-02")
    assert wrong.returncode == 2
    assert f"No such file: {tmp_path / 'feeds' / '2026-12-02.csv'} - for_each.file of step 1" in wrong.stdout
    dry = answer_of(pooler("run", str(pool), "--var", "date=2026-12-01", "--dry-run", "--json"))
    assert dry["calls"] == 2
    assert dry["steps"][0]["rows"]["count"] == 2
    assert dry["steps"][0]["key"]["first"] == "feed-2026-12-01-A"
    proc = run(store, tmp_path, pool, "--var", "date=2026-12-01")
    assert proc.returncode == 0, proc.stderr
    assert [op["params"] for op in store.ops()] == [{"sku": "A"}, {"sku": "B"}]
    assert "${row.x}" not in DATED
    rowed = write(tmp_path, "rowed.yaml", DATED.replace("feeds/${date}.csv", "feeds/${row.sku}.csv"))
    assert ("${row.sku} in for_each.file of step 1: a data file's name is known before its rows are read"
            in pooler("check", str(rowed)).stdout)


def test_a_row_field_the_header_lacks_is_told_by_check_with_did_you_mean(store: Store,
                                                                          tmp_path: Path) -> None:
    write(tmp_path, "goods.csv", "sku,name\nA,x\n")
    pool = write(tmp_path, "typo.yaml",
                 f'pool:\n  - {{{ECHO}, params: {{sku: "${{row.skuu}}"}}, for_each: {{file: goods.csv}}}}\n')
    expected = (f"{pool}:2:63: ${{row.skuu}} in params.sku of step 1: {tmp_path / 'goods.csv'} has no "
                "field [skuu] - did you mean sku?")
    assert pooler("check", str(pool)).stdout.splitlines()[0] == expected
    assert pooler("run", str(pool), "--dry-run").stderr.splitlines()[0] == expected
    assert refused_unsent(store, tmp_path, pool).splitlines()[0] == expected


def test_a_semicolon_file_is_told_and_read_with_delimiter(store: Store, tmp_path: Path) -> None:
    write(tmp_path, "semi.csv", "sku;name\nA;x\n")
    told = pooler("check", str(over(tmp_path, "plain.yaml", "semi.csv"))).stdout
    assert ("has no field [sku] - its fields: sku;name. Its header is one field holding ';': give the "
            "separator with for_each.delimiter.") in told
    ran_with(store, tmp_path, over(tmp_path, "semi.yaml", "semi.csv", ", delimiter: ';'"),
             {"sku": "A", "name": "x"})


def test_a_latin1_file_is_told_and_read_with_encoding(store: Store, tmp_path: Path) -> None:
    (tmp_path / "latin.csv").write_bytes("sku,name\nA,café\n".encode("latin-1"))
    plain = over(tmp_path, "plain.yaml", "latin.csv")
    assert f"{tmp_path / 'latin.csv'} line 2 is not utf-8 text" in pooler("check", str(plain)).stdout
    ran_with(store, tmp_path, over(tmp_path, "latin.yaml", "latin.csv", ", encoding: latin-1"),
             {"sku": "A", "name": "café"})
    bad = over(tmp_path, "bad.yaml", "latin.csv", ", encoding: utf-16")
    assert ("for_each.encoding of step 1: the encoding 'utf-16' does not write a line end as one byte"
            in pooler("check", str(bad)).stdout)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e999"])
def test_a_row_value_json_cannot_carry_is_refused_by_check_data_and_run(store: Store, tmp_path: Path,
                                                                         value: str) -> None:
    write(tmp_path, "rows.jsonl", f'{{"sku": "A", "price": 1.5}}\n{{"sku": "B", "price": {value}}}\n')
    pool = write(tmp_path, "nan.yaml",
                 f'pool:\n  - {{{ECHO}, params: {{p: "${{row.price}}"}}, for_each: {{file: rows.jsonl}}}}\n')
    assert pooler("check", str(pool)).returncode == 0  # the header (first row) is fine
    check = pooler("check", str(pool), "--data")
    assert check.returncode == 2
    assert f"{tmp_path / 'rows.jsonl'} line 2: " in check.stdout
    assert "JSON carries only finite numbers" in check.stdout
    assert "JSON carries only finite numbers" in refused_unsent(store, tmp_path, pool)


def test_check_resolves_variables_as_run_does() -> None:
    pool = str(ROOT / "pools" / "vars.yaml")
    assert pooler("check", pool).returncode == 0  # without inputs, variables are not resolved
    told = pooler("check", pool, "--env")
    assert told.returncode == 2
    assert told.stdout.splitlines()[0] == (
        f"{pool}:23:3: The variable [signature] has no value - give it with --var signature=VALUE, set the "
        "environment variable SHOP_SIGNATURE, or give it a default under vars.")
    assert pooler("check", pool, "--env", env={"SHOP_SIGNATURE": "s3cret-value"}).returncode == 0
    assert pooler("check", pool, "--var", "signature=x").returncode == 0


def test_check_reports_every_problem_at_once_against_a_store_too(store: Store, tmp_path: Path) -> None:
    write(tmp_path, "rows.csv", "sku,name\nA,x\nA,y\n")
    pool = write(tmp_path, "all.yaml", f"""\
vars:
  shop: {{description: the shop}}
pool:
  - {{{ECHO}, params: {{x: "${{nope}}"}}, into: "a+b"}}
  - {{{ECHO}, params: {{sku: "${{row.skuu}}"}}, key: "k-${{row.sku}}", for_each: {{file: rows.csv}}}}
  - {{{ECHO}, for_each: {{file: gone.csv}}, params: {{n: "${{row.n}}"}}}}
  - {{unit: MELBIS_AGENT_NOPE, command: CmdList}}
""")
    proc = pooler("check", str(pool), "--against", store.url, "--var", "shop=S", "--data",
                  env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 2
    heads = [line[len(str(pool)) + 1:] for line in proc.stdout.splitlines() if line.startswith(f"{pool}:")]
    assert [h.split(": ", 1)[1][:30] for h in heads] == [
        "${nope} in params.x of step 1 ",
        "into is the bare name of a job",
        "${row.skuu} in params.sku of s",
        f"rows 1 and 2 of {tmp_path}"[:30],
        f"No such file: {tmp_path}"[:30],
        "No tool [MELBIS_AGENT_NOPE] in",
    ], proc.stdout
    assert proc.stdout.rstrip().endswith("6 problems in 1 of 1 file")


def test_two_rows_with_one_key_are_refused_before_anything_is_sent(store: Store, tmp_path: Path) -> None:
    write(tmp_path, "rows.csv", "sku,name\nA,x\nB,y\nA,z\n")
    for mode in ("sequential", "parallel"):
        pool = write(tmp_path, f"{mode}.yaml", f"""\
mode: {mode}
pool:
  - {{{ECHO}, params: {{sku: "${{row.sku}}", name: "${{row.name}}"}}, key: "g-${{row.sku}}",
     for_each: {{file: rows.csv}}}}
""")
        expected = (f"{pool}:3:104: rows 1 and 3 of {tmp_path / 'rows.csv'} give one key [g-A] - keys "
                    "must be unique: the second call would be skipped as done. Put the field that tells "
                    "the rows apart in the key.")
        assert pooler("check", str(pool), "--data").stdout.splitlines()[0] == expected
        assert refused_unsent(store, tmp_path, pool).splitlines()[0] == expected


def test_a_secret_in_a_problem_check_tells_is_masked(tmp_path: Path) -> None:
    write(tmp_path, "rows.csv", "sku\nA\nA\n")
    pool = write(tmp_path, "secret.yaml", f"""\
vars: {{tok: {{env: SHOP_TOK}}}}
pool:
  - {{{ECHO}, params: {{sku: "${{row.sku}}"}}, key: "g-${{tok}}-${{row.sku}}", for_each: {{file: rows.csv}}}}
""")
    proc = pooler("check", str(pool), "--env", "--data", env={"SHOP_TOK": "sekrit-value"})
    assert proc.returncode == 2
    assert "give one key [g-***-A]" in proc.stdout
    assert "sekrit" not in proc.stdout + proc.stderr


def problems_told(proc: subprocess.CompletedProcess[str], pool: Path) -> list[str]:
    """The messages of the headlines ``pooler check`` printed for ``pool``, without the spot."""
    return [line.split(": ", 1)[1] for line in proc.stdout.splitlines() if line.startswith(f"{pool}:")]


BROKEN_AND_WRONG = """\
mode: paralel
vars:
  shop: {default: Main, sekret: true}
pool:
  - {name: first, ECHO, retry: {attempts: "3"}, params: {x: "${shop}"}}
  - {ECHO, params: {id: "@first.id", y: "${shopp}"}, into: "a+b", extra: 1}
  - {ECHO, params: {id: "@frist.id"}}
"""
#: The same pool with the schema's problems mended and the meaning problems left as they were.
MENDED = """\
mode: parallel
vars:
  shop: {default: Main, secret: true}
pool:
  - {name: first, ECHO, retry: {attempts: 3}, params: {x: "${shop}"}}
  - {ECHO, params: {id: "@first.id", y: "${shopp}"}, into: "a+b"}
  - {ECHO, params: {id: "@frist.id"}}
"""


def test_check_tells_the_schemas_problems_and_the_meaning_problems_in_one_report(tmp_path: Path) -> None:
    # Once check stopped at the schema: mending those problems revealed new ones, stage after stage.
    broken = write(tmp_path, "broken.yaml", BROKEN_AND_WRONG.replace("ECHO", ECHO))
    first = pooler("check", str(broken))
    assert first.returncode == 2
    told = problems_told(first, broken)
    assert [t[:34] for t in told] == [
        "Unknown mode [paralel] - did you m",
        "Unknown key [sekret] in variable s",
        'retry.attempts of step 1 must be a',
        "${shopp} in params.y of step 2 nam",
        "into is the bare name of a job - [",
        "Unknown key [extra] in step 2 - di",
        "@frist.id names no step - it would",
    ], first.stdout
    mended = write(tmp_path, "mended.yaml", MENDED.replace("ECHO", ECHO))
    second = problems_told(pooler("check", str(mended)), mended)
    # Mending what was told reveals nothing new: what is left was told the first time.
    assert second == [t for t in told if t in second]
    assert len(second) == 3


def test_dry_run_and_run_tell_the_same_whole_report_and_send_nothing(store: Store, tmp_path: Path) -> None:
    broken = write(tmp_path, "broken.yaml", BROKEN_AND_WRONG.replace("ECHO", ECHO))
    told = problems_told(pooler("check", str(broken)), broken)
    for extra in (("--dry-run",), ()):
        proc = run(store, tmp_path, broken, *extra)
        assert proc.returncode == 2, proc.stderr
        assert [p["message"] for p in json.loads(proc.stdout)["problems"]] == told
    assert store.ops() == []


def test_a_step_the_loader_cannot_read_still_answers_to_its_name(tmp_path: Path) -> None:
    # Step 1 is broken; the steps after it that refer to it or take its rows are not told as wrong.
    pool = write(tmp_path, "stand-in.yaml", f"""\
pool:
  - {{name: goods, {ECHO}, debug: "yes", into: goods}}
  - {{{ECHO}, params: {{id: "@goods.id"}}}}
  - {{{ECHO}, params: {{id: "${{row.id}}"}}, for_each: {{step: goods, table: goods}}, key: "g-${{row.id}}"}}
""")
    proc = pooler("check", str(pool))
    assert problems_told(proc, pool) == ['debug of step 1 must be true or false, not the text "yes".']


def test_vars_that_are_no_mapping_are_told_alone(tmp_path: Path) -> None:
    # With the declarations unreadable, every ${name} would be told as naming no variable: noise.
    pool = write(tmp_path, "vars-list.yaml", f"""\
vars: [shop]
pool:
  - {{{ECHO}, params: {{x: "${{shop}}"}}}}
""")
    proc = pooler("check", str(pool))
    assert problems_told(proc, pool) == ["vars must be an object, not a list."]


def test_a_params_source_that_cannot_be_read_leaves_its_step_to_that_problem(tmp_path: Path) -> None:
    write(tmp_path, "fields.json", "[1, 2]")
    pool = write(tmp_path, "source.yaml", f"""\
mode: paralel
pool:
  - {{{ECHO}, params_source: fields.json, for_each: {{file: rows.csv, chunk: 10}}}}
""")
    proc = pooler("check", str(pool))
    # The step's own checks wait for its fields; its data file is a problem of its own.
    assert [t[:40] for t in problems_told(proc, pool)] == [
        "Unknown mode [paralel] - did you mean pa", f"No such file: {tmp_path}/rows.csv"[:40]]
    assert f"{tmp_path}/fields.json:1:1: {tmp_path}/fields.json holds no object of fields" in proc.stdout
    assert proc.stdout.rstrip().endswith("3 problems in 1 of 1 file")
