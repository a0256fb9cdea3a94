"""Reports of ``pooler check``: JUnit XML for CI, and the JSON answer of ``--json``.

``results`` is one ``(file, problems)`` pair per file checked, in the order checked; a file with no
problems is valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pooler.errors import Problem

Results = Sequence[tuple[str, Sequence[Problem]]]


def junit_xml(results: Results) -> str:
    """One testsuite "pooler check", one testcase per file, a <failure> per problem."""
    # Imported here: only --junit writes XML.
    import xml.etree.ElementTree as ET  # noqa: PLC0415

    from pooler.report.junit import xml_text  # noqa: PLC0415

    failures = sum(len(problems) for _, problems in results)
    failed_files = sum(1 for _, problems in results if problems)
    # Only what Jenkins' JUnit schema (its xUnit plugin's junit-10.xsd) takes: the count of
    # problems is a property, and a test case is named by its file.
    suites = ET.Element("testsuites", name="pooler check", tests=str(len(results)),
                        failures=str(failed_files), errors="0")
    suite = ET.SubElement(suites, "testsuite", name="pooler check", tests=str(len(results)),
                          failures=str(failed_files), errors="0", skipped="0")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="problems", value=str(failures))
    for file, problems in results:
        case = ET.SubElement(suite, "testcase", classname="pooler.check", name=xml_text(file))
        for problem in problems:
            failure = ET.SubElement(case, "failure", message=xml_text(problem.headline()), type="problem")
            failure.text = xml_text(problem.render())
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def check_json(results: Results) -> dict[str, Any]:
    """``{"result", "files": [{"file", "valid", "problems": [...]}]}``, the answer of ``check --json``."""
    files = [
        {"file": file, "valid": not problems, "problems": [problem_json(p) for p in problems]}
        for file, problems in results
    ]
    return {"result": all(f["valid"] for f in files), "files": files}


def problem_json(problem: Problem) -> dict[str, Any]:
    """A problem as JSON: message, file, line, column, step, path (null where not known)."""
    return {
        "message": problem.message,
        "file": problem.file,
        "line": problem.line,
        "column": problem.column,
        "step": problem.step,
        "path": problem.path,
    }
