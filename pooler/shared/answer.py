"""A shared task's answer (contract §3), built from the calls the journal recorded, whichever runner
made them: any runner, on any host, at any time, gets the same answer from the same records.

A call not recorded done counts as not run: nothing is reported completed that the journal does
not hold.
"""

from __future__ import annotations

from typing import Any

from pooler.pool.model import Pool
from pooler.run.answer import Collector
from pooler.run.plancount import PlanCounts
from pooler.shared.pg_journal import PgJournal


def steps_doc(pool: Pool) -> list[dict[str, Any]]:
    """What the answer needs of each step, kept with the task so ``pooler show`` needs no pool file."""
    return [{"num": s.num, "name": s.name, "unit": s.unit, "command": s.command,
             "over_rows": s.for_each is not None} for s in pool.steps]


def _head(step: dict[str, Any]) -> dict[str, Any]:
    return {k: step[k] for k in ("num", "name", "unit", "command")}


def task_answer(journal: PgJournal, task: str, shared: dict[str, Any], *, trip_ms: int = 0,
                interrupted: str | None = None) -> dict[str, Any]:
    """The answer of the task from its work rows; ``shared`` is what the task keeps of its pool."""
    rows = journal.query("SELECT num, idx, kind, size, state, status, entry, doubt, doubted, step_id, "
                         "detail FROM work WHERE task = %s ORDER BY num, idx", (task,))
    by_num: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_num.setdefault(int(row[0]), []).append(row)
    collector = Collector(include_results=bool(shared["options"]["include_results"]))
    total = 0
    for step in shared["steps"]:
        calls = by_num.get(int(step["num"]), [])
        total += max(len(calls), 1)
        if not step["over_rows"]:
            _single(collector, calls)
        else:
            _over_rows(collector, step, calls)
    return collector.answer(total=total, task=task, trip_ms=trip_ms, interrupted=interrupted)


def _doubt(collector: Collector, row: tuple[Any, ...]) -> None:
    entry, doubt, doubted, step_id = row[6], row[7], row[8], row[9]
    if entry is not None:
        # A call in doubt with nothing done about it is listed too, as the run on SQLite lists it.
        collector.add_in_doubt(entry, doubt, doubted or step_id)


def _single(collector: Collector, calls: list[tuple[Any, ...]]) -> None:
    for row in calls:
        if row[4] == "done" and row[6] is not None:
            collector.add(row[6])
            _doubt(collector, row)


def _over_rows(collector: Collector, step: dict[str, Any], calls: list[tuple[Any, ...]]) -> None:
    collector.open_rows(_head(step))
    # A placeholder counts once it is done: its step could not read the table it runs over.
    real = [r for r in calls if r[2] == "call" or r[4] == "done"]
    rows_total = sum(int(r[3]) for r in real) if real else None
    blocked = [r for r in real if r[4] == "done" and r[5] == "not_run"]
    if real and len(blocked) == len(real):
        why = (blocked[0][6] or {}).get("message", "")
        collector.close_rows(int(step["num"]), status="not_run", rows_total=rows_total, whole=False, why=why,
                             calls=len(real))
        return
    statuses = set()
    detail: Any = None
    last = -1
    done = 0
    for row in real:
        if row[4] != "done":
            continue
        done += 1
        status = row[5]
        if status == "not_run":
            continue
        statuses.add(status)
        collector.add_row(row[6], int(row[3]))
        _doubt(collector, row)
        if status in ("completed", "skipped") and int(row[1]) > last:
            last, detail = int(row[1]), row[10]
    whole = bool(real) and done == len(real)
    if "in_doubt" in statuses:
        status = "in_doubt"
    elif "failed" in statuses:
        status = "failed"
    elif whole:
        status = "completed"
    else:
        status = "not_run"
    collector.close_rows(int(step["num"]), status=status, rows_total=rows_total, whole=whole,
                         detail=detail if status == "completed" else None)


def shared_answer_of(journal: Any, task: str) -> dict[str, Any] | None:
    """The answer so far of a shared task still running (built from its calls); None for a task
    that finished (its recorded answer is whole) or one that is not shared."""
    from pooler.shared.pg_journal import PgJournal  # noqa: PLC0415

    if not isinstance(journal, PgJournal):
        return None
    rows = journal.query("SELECT shared, status, answer IS NULL FROM tasks WHERE id = %s", (task,))
    if not rows or rows[0][0] is None or (rows[0][1] != "running" and not rows[0][2]):
        return None
    return task_answer(journal, task, rows[0][0])


def plan_counts_of(journal: Any, task: str) -> PlanCounts | None:
    """A shared task counted against its plan (its work rows; a step over rows by its rows), as
    ``pooler runs`` and ``pooler show`` count a task on SQLite: a call not recorded done is not run.
    None for a journal that is not on PostgreSQL or a task that is not shared."""
    from pooler.shared.pg_journal import PgJournal  # noqa: PLC0415

    found = getattr(journal, "journal", journal)
    if not isinstance(found, PgJournal):
        return None
    rows = found.query(
        "SELECT CASE WHEN w.state <> 'done' THEN 'not_run' ELSE w.status END, sum(w.size) FROM work w "
        "JOIN tasks t ON t.id = w.task WHERE w.task = %s AND w.kind = 'call' AND t.shared IS NOT NULL "
        "GROUP BY 1", (task,))
    if not rows:
        return None
    by = {str(status): int(n) for status, n in rows}
    return PlanCounts(planned=sum(by.values()), completed=by.get("completed", 0), failed=by.get("failed", 0),
                      in_doubt=by.get("in_doubt", 0), skipped=by.get("skipped", 0),
                      not_run=by.get("not_run", 0))
