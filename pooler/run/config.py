"""How a pool is run, beside its own options: the task, the in-doubt policy, the variables, the
sample; and what every part of a run works out of a pool alike (where its files are read from,
each step's plan)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pooler.journal.documents import Conflict, InDoubt
from pooler.journal.work import Redrive
from pooler.pool.model import Pool, Step
from pooler.pool.paramplan import plan_chunk_row, plan_params
from pooler.redact import Redactor
from pooler.run.callplan import StepPlan
from pooler.run.identity import table_prefix
from pooler.run.storerate import StoreRate

if TYPE_CHECKING:
    from pooler.run.compare import Classified


@dataclass
class RunConfig:
    """How to run a pool, beside its own options (which the CLI has already overridden)."""

    #: Tables go to ``<out>/tables``, ``into`` jobs to ``<out>``.
    out: Path
    #: None: a new task with a generated id.  An id the journal holds: that task runs again.
    task_id: str | None = None
    #: Continue the last unfinished task of this pool file (a new task when there is none).
    resume: bool = False
    #: What to do with a key an earlier run sent without recording its answer.
    in_doubt: InDoubt = "retry"
    #: Calls in doubt of a step with a probe are probed first: what --in-doubt does when the
    #: command line does not say.
    probe: bool = True
    #: Resolved ``${var}`` values (a mapping, or an object whose ``values`` is one).
    variables: Mapping[str, Any] = field(default_factory=dict)
    redactor: Redactor = field(default_factory=Redactor)
    #: Only the first N rows of every step over rows.
    sample: int | None = None
    #: Remove the step tables of ``out`` before the run.  None: when the task is new (a task run
    #: again keeps the rows of the calls it skips).
    clear_tables: bool | None = None
    #: The command-line options that name where the run went (``--store`` as given, ``--out``,
    #: ``--journal``), kept with the run so the report's commands run as written.
    again: tuple[str, ...] = ()
    #: A task whose files changed since it was planned is planned again from them (see
    #: replanning.py) instead of refused.
    replan: bool = False
    #: The caller checked the pool itself (``run_pool``): the task's plan finds and reads its data
    #: files without checking them again.
    checked: bool = False
    #: A redrive of the task (``pooler redrive``): the run it begins sends only what this says,
    #: from the plan the journal holds (the data files are not looked at).
    redrive: Redrive | None = None
    #: The saved plan this run applies (``pooler apply``): its task must be new, so that a plan
    #: applies once, whichever process applies it.
    applies: str | None = None
    #: The store's rate (``rate:`` of a named store, ``--store-rate``): one bucket for every task
    #: and every process that calls the store.
    store_rate: StoreRate | None = None
    #: The steps' compares as a saved plan's apply found them (``pooler apply``): the task is
    #: planned from these, so it sends exactly the calls checked against the plan's; None: each
    #: step with ``compare:`` reads the store as the task is planned.
    compared: Mapping[int, Classified] | None = None
    #: The calls a saved plan's apply does not send: their rows moved in the store since the plan
    #: (``pooler.run.conflicts``).  Each ends not_run, and the task's answer lists them.
    conflicts: Sequence[Conflict] = ()


class StopSignal(threading.Event):
    """A stop request that remembers why, so the answer can say ``"interrupted": "SIGINT"``.

    Any ``threading.Event`` stops a run; this one also names the cause.
    """

    def __init__(self) -> None:
        super().__init__()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        """Ask the run to stop (no new call starts; calls in flight finish)."""
        if self.reason is None:
            self.reason = reason
        self.set()


def pool_base(pool: Pool) -> Path:
    """The folder the pool's relative data files are read from: the loader's, else the file's."""
    return Path(pool.base).absolute() if pool.base is not None else Path(pool.file).absolute().parent


def values_of(variables: Any) -> Mapping[str, Any]:
    """The resolved values of ``RunConfig.variables`` (a mapping, or a ``Variables``)."""
    if isinstance(variables, Mapping):
        return variables
    found = getattr(variables, "values", None)
    return found if isinstance(found, Mapping) else {}


def step_plan(step: Step, known: set[str], *, keep_tables: bool) -> StepPlan:
    """A step's plan: the steps it waits for (of the ``known`` earlier ones, lower-case names) and
    its params compiled once, references and templates included."""
    fe = step.for_each
    params = plan_params(step.params, known, step)
    deps = set(params.steps())
    if fe is not None and fe.step and fe.step.lower() in known:
        deps.add(fe.step.lower())
    return StepPlan(step=step, prefix=table_prefix(step), params=params, deps=frozenset(deps),
                    over_rows=fe is not None, chunk_field=fe.field if fe and fe.chunk else None,
                    keep_tables=keep_tables,
                    probe=plan_params(step.probe.params, (), step) if step.probe is not None else None,
                    chunk_row=plan_chunk_row(step) if fe and fe.chunk else None)


def runner_width(pool: Pool, width: int | None) -> int:
    """The calls a runner of ``pool`` has in flight at most: its ``width``, within the pool's cap
    (one in sequential mode)."""
    opts = pool.options
    cap = opts.max_concurrency if opts.mode == "parallel" else 1
    return min(width or cap, cap)
