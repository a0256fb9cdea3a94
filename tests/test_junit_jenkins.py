"""JUnit that Jenkins takes: check's and run's JUnit files pass its xUnit plugin's junit-10.xsd."""

from __future__ import annotations

from pathlib import Path

from helpers import ROOT, Store, pooler
from junit_schema import jenkins_junit


def test_check_junit_passes_jenkins_schema_and_keeps_the_problem_count_as_a_property(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("pool:\n  - {name: a, unit: U, command: C}\n  - {name: A, unit: U, command: C}\n",
                   encoding="utf-8")
    report = tmp_path / "check.xml"
    proc = pooler("check", str(bad), str(ROOT / "pools" / "demo.yaml"), "--junit", str(report))
    assert proc.returncode == 2
    root = jenkins_junit(report)
    suite = root.find("testsuite")
    assert suite is not None
    assert [(p.get("name"), p.get("value")) for p in suite.iter("property")] == [("problems", "1")]
    assert [c.get("name") for c in suite.iter("testcase")] == [str(bad), str(ROOT / "pools" / "demo.yaml")]
    assert (root.get("tests"), root.get("failures")) == ("2", "1")


def test_run_junit_passes_jenkins_schema_with_its_skipped_steps(store: Store, tmp_path: Path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text("pool:\n  - {name: fails, unit: MELBIS_AGENT_TEST, command: CmdFail}\n"
                    "  - {name: later, unit: MELBIS_AGENT_TEST, command: CmdEcho, params: {x: '@fails.y'}}\n",
                    encoding="utf-8")
    junit = tmp_path / "run.xml"
    proc = pooler("run", str(pool), "--store", store.url, "--out", str(tmp_path / "out"), "--journal",
                  str(tmp_path / "journal.sqlite"), "--no-stop-on-error", "--junit", str(junit),
                  env={"POOLER_TOKEN": store.token})
    assert proc.returncode == 1, proc.stderr
    root = jenkins_junit(junit)
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("2", "1", "1")
    assert root.get("skipped") is None
