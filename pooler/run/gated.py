"""What a runner puts around its ``CallRunner``: a client that lets a request leave only while the
lease is alive (with the call's fencing token), and a table writer that keeps the masked rows for
the journal."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pooler.client.answer_scan import TableRows
from pooler.client.http import Reply
from pooler.journal.work import RunnerLease
from pooler.redact import Redactor
from pooler.run.tables import RowsTooDeepError, TableWriter

#: The header that carries a call's fencing token: ``<runner>:<epoch>``.
LEASE_HEADER = "Pooler-Lease"


class GatedClient:
    """A ``ToolRunClient`` whose requests leave only while the lease is alive: checked as the last
    thing before each request's first byte is written (the client's ``before_send``), after the
    connection is made, and each request carries the call's fencing token (``Pooler-Lease``), so
    a store that keeps the highest epoch of each key refuses a request older than one it saw."""

    def __init__(self, inner: Any, lease: RunnerLease) -> None:
        self.inner = inner
        self.lease = lease
        self._local = threading.local()

    def begin(self, epoch: int, start: Callable[[], None] | None = None) -> None:
        """A call starts on this thread under the fencing ``epoch`` its gate gave: no request of it
        has left yet.  ``start`` runs before its first request's first byte (its rate's slot)."""
        self._local.tries = 0
        self._local.fence = f"{self.lease.id}:{epoch}"
        self._local.start = start

    def left(self) -> bool:
        """Whether a request of this thread's call left."""
        return bool(getattr(self._local, "tries", 0))

    def _last_check(self) -> None:
        start = getattr(self._local, "start", None)
        if start is not None:
            # The slot first, then the lease: a runner whose lease ran out while it waited for
            # its slot sends nothing.
            self._local.start = None
            start()
        # Raised here, nothing of the request has been written; passed, it is out.
        self.lease.check()
        self._local.tries = getattr(self._local, "tries", 0) + 1

    def tool_run(self, *args: Any, **kwargs: Any) -> Reply:
        # Checked before the request is made too: a runner past its lease does not even connect.
        self.lease.check()
        fence = getattr(self._local, "fence", None)
        headers = dict(kwargs.pop("headers", None) or {})
        if fence:
            headers[LEASE_HEADER] = fence
        reply: Reply = self.inner.tool_run(*args, headers=headers, before_send=self._last_check, **kwargs)
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class KeepingWriter(TableWriter):
    """Writes tables as ``TableWriter`` does and keeps this thread's call's rows, masked, so the
    journal can hold them: a later step reads them on any host, ``pooler gather`` writes them out."""

    def __init__(self, out: Path) -> None:
        super().__init__(out)
        self._local = threading.local()

    def begin(self) -> None:
        self._local.kept = None

    def kept(self) -> dict[str, list[Any]] | None:
        found: dict[str, list[Any]] | None = getattr(self._local, "kept", None)
        return found

    def write(self, prefix: str, tables: Mapping[str, Any], into: str | None = None,
              append: bool = False, redactor: Redactor | None = None, *,
              call: str | None = None) -> dict[str, dict[str, Any]]:
        kept: dict[str, list[Any]] = {}
        for table, rows in (tables or {}).items():
            seq = rows if isinstance(rows, list | tuple | TableRows) else [rows]
            name = redactor.text(str(table)) if redactor else str(table)
            try:
                kept[name] = [redactor.value(r) if redactor else r for r in seq]
            except RecursionError:
                # As the writer tells it: the answer cannot be read whole, so the call is in doubt.
                raise RowsTooDeepError(f"the table {table!r} holds rows nested too deep to read") from None
        self._local.kept = kept
        return super().write(prefix, kept, into=into, append=append, redactor=None, call=call)

