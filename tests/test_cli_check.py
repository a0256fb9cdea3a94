"""``pooler check``: every problem of every file at once, reports for CI, and --against a store."""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers import ROOT, Store, answer_of, pooler
from junit_schema import jenkins_junit

BROKEN_YAML = """\
pool:
  - {name: a, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {x: "@b.id"}}
  - {name: b, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {x: "${nope}"}, key: same}
  - {name: c, unit: MELBIS_AGENT_TEST, command: CmdEcho, key: same}
"""
BROKEN_JSON = """\
{"pool": [
  {"name": "x.y", "unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "files": []},
  {"name": "X.Y", "unit": "MELBIS_AGENT_TEST"}
]}
"""


def broken_pair(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "first.yaml", tmp_path / "second.json"
    first.write_text(BROKEN_YAML)
    second.write_text(BROKEN_JSON)
    return first, second


def test_all_problems_of_two_broken_files_at_once_with_carets(tmp_path: Path) -> None:
    first, second = broken_pair(tmp_path)
    proc = pooler("check", str(first), str(second), str(ROOT / "pools" / "demo.yaml"))
    assert proc.returncode == 2
    out = proc.stdout
    headlines = [line for line in out.splitlines() if re.match(r"^/\S+:\d+:\d+: ", line)]
    assert [re.match(r"^(\S+?):(\d+):", h).groups() for h in headlines] == [  # type: ignore[union-attr]
        (str(first), "2"), (str(first), "3"), (str(first), "4"),
        (str(second), "2"), (str(second), "2"), (str(second), "3"), (str(second), "3"), (str(second), "3"),
    ]
    assert f"{first}:2:70: @b.id refers to step 2, which comes later" in out
    assert f"{first}:3:71: ${{nope}} in params.x of step 2 names no variable - declare it under vars." in out
    assert f"{first}:4:63: Two steps carry the key [same] - steps 2 and 3" in out
    assert f"{second}:2:12: The name of step 1 carries a dot" in out
    assert f"{second}:2:70: Step 1 carries files" in out
    assert "Step 2 needs unit and command" in out
    assert f"{second}:3:12: The name of step 2 carries a dot" in out
    assert f"{second}:3:12: Two steps are named [X.Y] - steps 1 and 2" in out
    # Every headline is followed by its line and a caret under the column it names.
    lines = out.splitlines()
    for i, line in enumerate(lines):
        found = re.match(r"^\S+?:(\d+):(\d+): ", line)
        if found:
            num, col = int(found.group(1)), int(found.group(2))
            assert re.match(rf"^ +{num} \| ", lines[i + 1])
            gutter = lines[i + 1].index("| ") + 2
            assert lines[i + 2].index("^") == gutter + col - 1
    assert out.rstrip().endswith("8 problems in 2 of 3 files")


def test_valid_files_exit_0(tmp_path: Path) -> None:
    proc = pooler("check", *(str(p) for p in sorted((ROOT / "pools").glob("*.*"))))
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.endswith("\n7 files valid\n")
    assert proc.stdout.count("pooler: notice: ") == 1


def test_junit_is_valid_xml_with_a_failure_per_problem(tmp_path: Path) -> None:
    first, second = broken_pair(tmp_path)
    report = tmp_path / "report" / "check.xml"
    report.parent.mkdir()
    proc = pooler("check", str(first), str(second), str(ROOT / "pools" / "demo.yaml"), "--junit", str(report))
    assert proc.returncode == 2
    root = jenkins_junit(report)
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == [str(first), str(second), str(ROOT / "pools" / "demo.yaml")]
    assert [len(c.findall("failure")) for c in cases] == [3, 5, 0]
    message = cases[0].findall("failure")[2].get("message")
    assert message is not None
    assert message.startswith(f"{first}:4:63: Two steps carry the key [same]")


def test_json_is_one_document_and_the_text_goes_to_stderr(tmp_path: Path) -> None:
    first, _ = broken_pair(tmp_path)
    proc = pooler("check", str(first), "--json")
    assert proc.returncode == 2
    answer = answer_of(proc)
    assert answer["result"] is False
    problems = answer["files"][0]["problems"]
    assert [(p["line"], p["column"], p["step"]) for p in problems] == [(2, 70, 1), (3, 71, 2), (4, 63, 3)]
    assert "3 problems in 1 of 1 file" in proc.stderr


def test_a_file_that_cannot_be_read_is_one_problem_among_the_others(tmp_path: Path) -> None:
    cut = tmp_path / "cut.yaml"
    cut.write_text("pool:\n  - {unit: X, command: [\n")
    proc = pooler("check", str(cut), str(tmp_path / "missing.yaml"), "--json")
    assert proc.returncode == 2
    files = answer_of(proc)["files"]
    assert [f["valid"] for f in files] == [False, False]
    assert files[0]["problems"][0]["file"] == str(cut)
    assert "not valid YAML" in files[0]["problems"][0]["message"]


WRONG = """\
pool:
  - {unit: MELBIS_AGENT_CURRENCY, command: CmdAdd, params: {skey: EUR}}
  - {unit: MELBIS_AGENT_CURRENCY, command: CmdAddd, params: {name: Euro}}
  - {unit: MELBIS_AGENT_NOPE, command: CmdList}
"""


def test_against_a_store_adds_its_problems_and_writes_nothing(store: Store, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(WRONG)
    proc = pooler("check", str(wrong), "--against", store.url, env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 2, proc.stderr
    assert (f"{wrong}:2:60: The command [CmdAdd] needs the field [name] (str): it is required - "
            "add it to params.") in proc.stdout
    out = proc.stdout
    assert f"{wrong}:3:44: Unknown command [CmdAddd] of MELBIS_AGENT_CURRENCY - did you mean CmdAdd?" in out
    assert f"{wrong}:4:12: No tool [MELBIS_AGENT_NOPE] in the store - did you mean MELBIS_AGENT_STORE?" in out
    assert store.ops() == []
    # Without --against the same file is valid: those problems come only from the store.
    assert pooler("check", str(wrong)).returncode == 0


def test_against_with_the_pools_dir_is_valid(store: Store) -> None:
    pools = [str(p) for p in sorted((ROOT / "pools").glob("*.*"))]
    proc = pooler("check", *pools, "--against", store.url, "--json", env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 0, proc.stdout
    assert answer_of(proc)["result"] is True
    assert proc.stderr == (
        f"pooler: notice: {ROOT / 'pools' / 'vars.yaml'}: run reads SHOP_SIGNATURE (variable signature) from "
        "the environment, which this check did not read - run refuses the pool if it is unset; check with "
        f"--env where run has it.\n7 files valid against {store.url}\n")


def test_against_a_store_that_refuses_the_token_vouches_for_nothing_and_exits_2(store: Store,
                                                                                tmp_path: Path) -> None:
    proc = pooler("check", str(ROOT / "pools" / "demo.yaml"), "--against", store.url,
                  env={"POOLER_TOKEN": "wrong-token"})
    assert proc.returncode == 2
    assert f"pooler: the store at {store.url} refused tool_list: ACCESS_DENIED" in proc.stderr
    assert "wrong-token" not in proc.stderr
    assert json.dumps(store.ops()) == "[]"
