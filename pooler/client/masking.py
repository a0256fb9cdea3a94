"""A client whose answers come back with every secret masked."""

from __future__ import annotations

from typing import Any

from pooler.client.answer_scan import TableRows
from pooler.client.http import Reply, ToolRunClient
from pooler.redact import Redactor


class MaskingClient(ToolRunClient):
    """A client whose answers come back with every secret masked.

    The store may echo a secret back (a name written earlier, a field sent); masking it here, where
    answers enter, keeps it out of everything written downstream: tables, job files, the journal.
    """

    def __init__(self, *args: Any, redactor: Redactor, **kwargs: Any) -> None:
        super().__init__(*args, redactor=redactor, **kwargs)

    def tool_run(self, *args: Any, **kwargs: Any) -> Reply:
        reply = super().tool_run(*args, **kwargs)
        if self.redactor:
            # The detail stays whole: "@step.field" references read it, and a masked value would
            # reach the store as "***". Every output (answer, journal, screen) masks it itself.
            reply.data = {k if k == "detail" else self.redactor.text(k): v if k == "detail"
                          else self._masked_tables(v) if k == "tables" and isinstance(v, dict)
                          else self.redactor.value(v) for k, v in reply.data.items()}
        return reply

    def _masked_tables(self, tables: dict[str, Any]) -> dict[str, Any]:
        # Rows left in the body are masked one by one as they are read: no masked copy of a table.
        return {self.redactor.text(str(name)): rows.masked(self.redactor.value)
                if isinstance(rows, TableRows) else self.redactor.value(rows)
                for name, rows in tables.items()}
