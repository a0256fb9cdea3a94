"""A run again's work on the rows of a task, in its transaction, on any journal: the steps over a
table sent again planned afresh (``plan_again``), and the chunks beyond a widened sample cut at it
(``cut_at_sample``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pooler.journal.connector import Connector
from pooler.journal.work import OverTable, Split


def cut_at_sample(db: Connector, task: str, sample: int, split: Split) -> None:
    """The chunks planned beyond a task's sample that a wider ``sample`` cuts, split in two at its
    end, in the caller's transaction: the part after the cut takes the next idx, and the calls
    after it one more each, so the claim hands them out in file order still."""
    for cut in db.all("cut_by_sample", {"task": task, "sample": sample}):
        num, idx = int(cut["num"]), int(cut["idx"])
        data: list[Any] = list(db.json_out(cut["data"]))
        where = {"task": task, "num": num, "idx": idx}
        # Out of the way first, then back one on: a key is checked row by row.
        db.execute("make_room_out", where)
        db.execute("make_room_back", where)
        db.execute("drop_call", where)
        with db.bulk("insert_work") as write:
            for row in split(sample, num, idx=idx, next_idx=idx + 1, first=int(cut["row_first"]), data=data):
                write(row)


def plan_again(db: Connector, task: str, over: Iterable[OverTable]) -> None:
    """A run again sends some steps again (failed, not run, completed without a key): a step over
    the table of one of them gets its calls from the table that step gives this time, not from
    the one it gave before.  Its calls that would be sent are dropped and its placeholder put
    back (made again once the step is done, leaving out the keys of the calls it keeps, done or
    in doubt); in step order, so a step over that step's table follows.  The table rows of every
    call not done are dropped: they are the answers of calls this run sends again, or of calls no
    longer planned."""
    for step in over:
        found = db.one("step_open", {"task": task, "num": step.source})
        if found is not None and int(found["n"]):
            db.execute("drop_open_calls", {"task": task, "num": step.num})
            holder = step.placeholder
            had = db.one("has_placeholder", {"task": holder[0], "num": holder[1], "idx": holder[2]})
            if had is None or not int(had["n"]):
                with db.bulk("insert_work") as write:
                    write(holder)
    db.execute("drop_open_tables", {"task": task})
