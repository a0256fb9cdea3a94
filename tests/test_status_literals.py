"""Status words are written once, in pooler/statuses.py: no module of pooler spells one as a bare
string where it is used as a status.

The rule, applied to every module of pooler/ but statuses.py and the reference store (pooler/store/,
which has no status of its own), flags a string constant that is *exactly* one of the words of the
enums of pooler/statuses.py, when it stands:

- in a comparison (``==``, ``!=``, ``in``, ``not in``), alone or in a tuple, list or set compared;
- as the value under a ``"status"`` or ``"state"`` key of a dict display, as a ``status=``,
  ``state=`` or ``outcome=`` argument, as the default of ``.get("status", ...)``, or assigned to a
  name, attribute or subscript called ``status``, ``state`` or ``outcome``;
- as what a function returns, or as a parameter's default;
- in a tuple, list, set or dict display of two items or more that are all status words (a set of
  statuses: their values, or their keys).

A conditional expression or ``and``/``or`` in one of those places is looked through.  So a status
word inside a longer text (a message, an SQL statement: ``"... WHERE status = 'sent'"``) is not
flagged: the constant is the whole text, not the word; nor is a word used as a key or field name
(``answer["failed"]``, ``rows.get("not_run")``), an XML element's name or an argument by position.
"""

from __future__ import annotations

import ast
import json
from enum import Enum
from pathlib import Path

from pooler import statuses

ROOT = Path(__file__).resolve().parent.parent / "pooler"
WORDS = frozenset(m.value for e in vars(statuses).values()
                  if isinstance(e, type) and issubclass(e, Enum) and e is not Enum
                  for m in e)
NAMES = frozenset({"status", "state", "outcome"})


def _word(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in WORDS


def _looked_through(node: ast.AST | None) -> list[ast.AST]:
    """The constants a value may be: through ``x if c else y`` and ``a or b``."""
    if isinstance(node, ast.IfExp):
        return [*_looked_through(node.body), *_looked_through(node.orelse)]
    if isinstance(node, ast.BoolOp):
        return [n for v in node.values for n in _looked_through(v)]
    return [node] if node is not None else []


def _items(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return list(node.elts)
    return [node]


def _named(target: ast.AST) -> bool:
    if isinstance(target, ast.Name):
        return target.id in NAMES
    if isinstance(target, ast.Attribute):
        return target.attr in NAMES
    if isinstance(target, ast.Subscript):
        return isinstance(target.slice, ast.Constant) and target.slice.value in NAMES
    return False


def status_uses(tree: ast.AST) -> list[ast.Constant]:
    """The constants of ``tree`` the rule above flags."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found.extend(n for item in _items(side) for n in _looked_through(item))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in NAMES:
                    found.extend(_looked_through(value))
            for part in (node.keys, node.values):
                if len(part) >= 2 and all(_word(k) for k in part):
                    found.extend(k for k in part if k is not None)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            if len(node.elts) >= 2 and all(_word(e) for e in node.elts):
                found.extend(node.elts)
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in NAMES:
                    found.extend(_looked_through(kw.value))
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) == 2
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in NAMES):
                found.extend(_looked_through(node.args[1]))
        elif isinstance(node, ast.Assign):
            if any(_named(t) or (isinstance(t, ast.Tuple) and any(_named(e) for e in t.elts))
                   for t in node.targets):
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                found.extend(n for v in values for n in _looked_through(v))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            if _named(node.target):
                found.extend(_looked_through(node.value))
        elif isinstance(node, ast.Return):
            found.extend(_looked_through(node.value))
        elif isinstance(node, ast.arguments):
            for default in (*node.defaults, *node.kw_defaults):
                found.extend(_looked_through(default))
    flagged = {id(n): n for n in found if isinstance(n, ast.Constant) and _word(n)}
    return sorted(flagged.values(), key=lambda n: (n.lineno, n.col_offset))


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py")
                  if p != ROOT / "statuses.py" and ROOT / "store" not in p.parents)


def _flagged(source: str) -> list[str]:
    return [str(n.value) for n in status_uses(ast.parse(source))]


def test_no_module_of_pooler_spells_a_status_word_where_it_is_a_status() -> None:
    found = []
    for path in _modules():
        for node in status_uses(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}:{node.col_offset + 1}: "
                         f"{node.value!r} - use pooler.statuses")
    assert found == []


def test_the_scan_reads_every_module_of_the_engine_and_the_reports() -> None:
    names = {str(p.relative_to(ROOT)) for p in _modules()}
    assert {"run/call.py", "run/runner.py", "run/taskanswer.py", "journal/sqlite/tasks.py", "report/junit.py",
            "cli/render.py"} <= names
    assert "statuses.py" not in names
    assert not any(n.startswith("store/") for n in names)


def test_a_status_word_compared_returned_or_set_as_a_status_is_flagged() -> None:
    source = '''
if entry["status"] == "failed" or row.state in ("done", "sent"):
    pass
entry = {"status": "in_doubt" if lost else "completed", "key": None}
run.state = "waiting"
status: str = "partial"
collector.close_rows(1, status="not_run")
answer.get("status", "failed")
PASSED = ("completed", "skipped")
STYLE = {"completed": "green", "failed": "red"}
def told(status="running"):
    return "sampled"
'''
    assert _flagged(source) == ["failed", "done", "sent", "in_doubt", "completed", "waiting", "partial",
                                "not_run", "failed", "completed", "skipped", "completed", "failed",
                                "running", "sampled"]


def test_a_status_word_in_a_longer_text_a_key_or_a_plain_argument_is_not_flagged() -> None:
    source = '''
db.execute("SELECT id FROM tasks WHERE status != 'running'")
message = "2 failed, 1 in doubt"
failed = int(answer.get("failed") or 0) + rows["not_run"]
ET.SubElement(case, "skipped", message=message)
verdict = ("done", "green")
names = ("run", "num", "status", "in_doubt")
if kind == "done!":
    pass
'''
    assert _flagged(source) == []


def test_a_journal_record_sent_without_its_answer_is_in_doubt_as_its_call_s_final_status() -> None:
    assert statuses.final_status("sent") is statuses.CallStatus.IN_DOUBT
    assert [statuses.final_status(s.value) for s in statuses.CallStatus] == list(statuses.CallStatus)


def test_every_status_is_written_as_its_word() -> None:
    doc = {"status": statuses.StepStatus.PARTIAL, "rows": {statuses.CallStatus.NOT_RUN: 1},
           "task": statuses.TaskStatus.RUNNING}
    assert json.dumps(doc) == '{"status": "partial", "rows": {"not_run": 1}, "task": "running"}'
    assert f"{statuses.RecordStatus.SENT} {statuses.StepState.DONE}" == "sent done"
