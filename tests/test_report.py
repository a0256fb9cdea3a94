"""Check reports: JUnit XML a CI reads, and the JSON answer of ``check --json``."""

from __future__ import annotations

import json

import pytest
from helpers import ROOT
from junit_schema import jenkins_junit

from pooler.cli.check_report import check_json, junit_xml
from pooler.errors import PoolerError, Problem
from pooler.pool.checks import check_pool
from pooler.pool.loader import load_pool


def results_of(*names: str) -> list[tuple[str, list[Problem]]]:
    out: list[tuple[str, list[Problem]]] = []
    for name in names:
        try:
            problems = check_pool(load_pool(name))
        except PoolerError as exc:
            problems = list(exc.problems())
        out.append((name, problems))
    return out


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Problem]]]:
    monkeypatch.chdir(ROOT)
    return results_of("tests/pools/good-seed.json", "tests/pools/bad-twin-names.yaml",
                      "tests/pools/bad-ref-later.yaml")


def test_junit_has_one_testcase_per_file_and_a_failure_per_problem(
        results: list[tuple[str, list[Problem]]]) -> None:
    root = jenkins_junit(junit_xml(results))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.attrib["name"] == "pooler check"
    assert (suite.attrib["tests"], suite.attrib["failures"]) == ("3", "2")
    cases = suite.findall("testcase")
    assert [c.attrib["name"] for c in cases] == [
        "tests/pools/good-seed.json", "tests/pools/bad-twin-names.yaml", "tests/pools/bad-ref-later.yaml"]
    assert cases[0].findall("failure") == []
    (failure,) = cases[1].findall("failure")
    assert failure.attrib["message"] == (
        "tests/pools/bad-twin-names.yaml:6:11: Two steps are named [CUR] - steps 1 and 2; give each step "
        "its own name (case is not told apart).")
    assert failure.text == (
        "tests/pools/bad-twin-names.yaml:6:11: Two steps are named [CUR] - steps 1 and 2; give each step "
        "its own name (case is not told apart).\n"
        "    6 |   - name: CUR\n"
        "      |           ^")


def test_junit_keeps_to_characters_xml_can_carry() -> None:
    problem = Problem("bad \x00 byte \x1b[31m and \ud800 here", file="x.yaml", line=1, column=2,
                      source_line="a:\x07 b")
    text = junit_xml([("x.yaml", [problem])])
    failure = jenkins_junit(text).find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.attrib["message"] == "x.yaml:1:2: bad   byte  [31m and   here"
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?>\n')


def test_check_json_shape(results: list[tuple[str, list[Problem]]]) -> None:
    answer = check_json(results)
    assert answer["result"] is False
    assert answer["files"][0] == {"file": "tests/pools/good-seed.json", "valid": True, "problems": []}
    assert answer["files"][2] == {"file": "tests/pools/bad-ref-later.yaml", "valid": False, "problems": [{
        "message": "@cur.id refers to step 2, which comes later - it would be sent as text; move step 2 "
                   "before step 1.",
        "file": "tests/pools/bad-ref-later.yaml", "line": 4, "column": 37, "step": 1,
        "path": "pool[0].params.data[0].id",
    }]}
    json.dumps(answer)


def test_all_valid_is_a_true_result() -> None:
    assert check_json([("a.yaml", []), ("b.yaml", [])]) == {"result": True, "files": [
        {"file": "a.yaml", "valid": True, "problems": []}, {"file": "b.yaml", "valid": True, "problems": []}]}
    root = jenkins_junit(junit_xml([("a.yaml", [])]))
    assert root.find("testsuite") is not None
    assert root.attrib["failures"] == "0"
