"""Every state and status word the journals' SQL writes or compares is one of ``pooler.statuses``:
a word spelt one way in Python and another in a query would leave calls no claim or count sees."""

from __future__ import annotations

import re
from pathlib import Path

from pooler.statuses import CallStatus, InDoubtAction, PlanState, RecordStatus, TaskStatus, WorkState

JOURNAL = Path(__file__).resolve().parents[1] / "pooler" / "journal"
SQL_FILES = sorted(JOURNAL.glob("*/sql/**/*.sql"))

#: The words each column may hold, by its name in the SQL.
VOCABULARY = {
    "state": {*WorkState, *PlanState},
    "status": {*CallStatus, *TaskStatus, *RecordStatus},
    "doubt": {*InDoubtAction},
}


def words(text: str, column: str) -> set[str]:
    """The quoted words ``column`` is compared with (=, <>, IN, NOT IN) or set to (also by CASE)."""
    text = re.sub(r"--[^\n]*", "", text)
    found = set(re.findall(rf"\b(?:\w+\.)?{column}\s*(?:=|<>|!=)\s*'(\w+)'", text, re.I))
    for listed in re.findall(rf"\b(?:\w+\.)?{column}\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", text, re.I):
        found.update(re.findall(r"'(\w+)'", listed))
    for case in re.findall(rf"\b{column}\s*=\s*CASE\b(.*?)\bEND\b", text, re.I | re.S):
        found.update(re.findall(r"(?:THEN|ELSE)\s+'(\w+)'", case, re.I))
    return found


def test_the_sql_of_both_journals_is_found() -> None:
    backends = {path.relative_to(JOURNAL).parts[0] for path in SQL_FILES}
    assert backends == {"sqlite", "postgres"}
    assert all(words(path.read_text(encoding="utf-8"), "state") for path in SQL_FILES
               if path.name == "queries.sql")


def test_every_word_a_query_gives_a_state_or_a_status_is_in_the_vocabulary() -> None:
    unknown = {f"{path.relative_to(JOURNAL)}: {column} {word}"
               for path in SQL_FILES for column, known in VOCABULARY.items()
               for word in words(path.read_text(encoding="utf-8"), column) - known}
    assert not unknown, sorted(unknown)


def test_a_word_out_of_the_vocabulary_is_found() -> None:
    text = "UPDATE work SET state = CASE WHEN x THEN 'sent' ELSE 'claimd' END WHERE s.state IN ('redy')"
    assert words(text, "state") - VOCABULARY["state"] == {"claimd", "redy"}


def test_a_step_referred_to_is_open_in_every_state_but_done_and_beyond_its_sample() -> None:
    # The claims' check lists the open states (SQLite's work_open is read a state at a time): a
    # state added to the vocabulary and missing here would let a step run before the one it refers to.
    text = (JOURNAL / "sqlite" / "sql" / "queries.sql").read_text(encoding="utf-8")
    lists = re.findall(r"d\.state IN \(([^)]*)\)\s+AND d\.state <> 'done' AND d\.num = j\.value", text)
    assert len(lists) == 2
    for listed in lists:
        assert set(re.findall(r"'(\w+)'", listed)) == set(WorkState) - {WorkState.DONE, WorkState.BEYOND}


def test_the_calls_a_task_holds_are_those_of_every_open_state_but_ready_and_beyond_its_sample() -> None:
    # open_counts reads the index of open calls a state at a time: a state added to the vocabulary
    # and missing here would let a run end while another runner holds a call in it.
    for backend in ("sqlite", "postgres"):
        text = (JOURNAL / backend / "sql" / "queries.sql").read_text(encoding="utf-8")
        (listed,) = re.findall(r"state IN \(([^)]*)\)(?: AND state <> 'done')?\)\s+AS held", text)
        assert set(re.findall(r"'(\w+)'", listed)) == set(WorkState) - {WorkState.DONE, WorkState.BEYOND,
                                                                        WorkState.READY}
