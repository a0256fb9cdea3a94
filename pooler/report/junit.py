"""A run's answer as JUnit XML, as CI systems read it: one test case per step.

A step that completed (or was skipped: its key was done) passes; one that failed or is in doubt
is a ``<failure>`` with its message, and for a step over rows the failed and in-doubt calls it
lists (row and message, the count of the rest); a step never run is ``<skipped>``.  A run whose
failed and in-doubt calls stayed within its error budgets (``tolerate``) passed: its steps tell
their failed calls in ``<system-out>``, and the suite's properties say each budget's count.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from pooler.journal.documents import Answer
from pooler.pool.budget import budget_line, within_budget
from pooler.statuses import LANDED, TROUBLE


def run_junit_xml(answer: Answer, pool_file: str) -> str:
    """One testsuite named after the pool file, one testcase per step of the answer."""
    entries = [e for e in answer.get("steps") or [] if isinstance(e, dict)]
    # Within its error budgets a run passed: its failed calls are told, not failures of the suite.
    tolerated = within_budget(answer)
    failed = 0 if tolerated else sum(1 for e in entries if e.get("status") in TROUBLE)
    skipped = sum(1 for e in entries if e.get("status") not in (*LANDED, *TROUBLE))
    seconds = _seconds(answer)
    counts = {"tests": str(len(entries)), "failures": str(failed), "errors": "0", "skipped": str(skipped),
              "time": seconds}
    # Jenkins' JUnit schema (junit-10.xsd) takes no skipped count on <testsuites>; the suite has it.
    outer = dict(counts)
    del outer["skipped"]
    suites = ET.Element("testsuites", {"name": "pooler run", **outer})
    suite = ET.SubElement(suites, "testsuite", {"name": xml_text(pool_file), **counts})
    props = ET.SubElement(suite, "properties")
    for name in ("task", "status", "interrupted"):
        if answer.get(name) is not None:
            ET.SubElement(props, "property", name=name, value=xml_text(str(answer[name])))
    if answer.get("unchanged") is not None:
        # Rows a compare found unchanged are no test cases: the suite tells how many were not sent.
        ET.SubElement(props, "property", name="unchanged", value=str(answer["unchanged"]))
    for row in (answer.get("tolerated") or {}).get("budgets") or []:
        ET.SubElement(props, "property", name=f"tolerated.{row['kind']}", value=xml_text(budget_line(row)))
    probes = answer.get("probes")
    if isinstance(probes, dict):
        # What the probes of calls in doubt settled: landed, not landed, unsettled.
        for said in ("landed", "not_landed", "unsettled"):
            ET.SubElement(props, "property", name=f"probes_{said}", value=str(probes.get(said, 0)))
    for entry in entries:
        suite.append(_case(entry, pool_file, tolerated=tolerated))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _seconds(entry: Mapping[str, Any]) -> str:
    trip = (entry.get("time") or {}).get("trip") if isinstance(entry.get("time"), dict) else None
    return f"{trip / 1000:.3f}" if isinstance(trip, int | float) else "0"


def _case(entry: Mapping[str, Any], pool_file: str, *, tolerated: bool) -> ET.Element:
    named = f" {entry['name']}" if entry.get("name") else ""
    name = f"step {entry.get('num')}{named} {entry.get('unit')}.{entry.get('command')}"
    case = ET.Element("testcase", classname=xml_text(pool_file), name=xml_text(name), time=_seconds(entry))
    status = str(entry.get("status"))
    message = xml_text(str(entry.get("message") or status))
    if status in LANDED:
        return case
    if tolerated and (status in TROUBLE or entry.get("failures")):
        out = ET.SubElement(case, "system-out")
        out.text = xml_text("within the error budget: " + _failure_text(entry))
        return case
    if status not in TROUBLE:
        ET.SubElement(case, "skipped", message=message)
        return case
    failure = ET.SubElement(case, "failure", message=message, type=status)
    failure.text = xml_text(_failure_text(entry))
    return case


def _failure_text(entry: Mapping[str, Any]) -> str:
    lines = [str(entry.get("message") or entry.get("status"))]
    for call in entry.get("failures") or []:
        rows = call.get("rows")
        where = f"rows {rows[0]}-{rows[1]}" if isinstance(rows, list) and len(rows) == 2 else \
            f"row {call.get('row')}"
        key = f" key {call['key']}" if call.get("key") else ""
        lines.append(f"{where}{key}: {call.get('status')}: {call.get('message', '')}")
    more = entry.get("failures_omitted")
    if isinstance(more, int) and more:
        lines.append(f"and {more:,} more failed or in-doubt calls (the journal holds them all)")
    return "\n".join(lines)


def xml_text(text: str) -> str:
    """Text XML 1.0 can carry: other control characters, lone surrogates and U+FFFE/F become spaces."""
    return "".join(c if _xml_char(c) else " " for c in text)


def _xml_char(c: str) -> bool:
    return c in "\t\n" or (" " <= c < "\ud800") or ("\ue000" <= c <= "\ufffd") or c >= "\U00010000"
