"""Fencing tokens (``pooler store serve --fence-leases``): a request older than one already seen for
its call is refused, with nothing run.

A runner sharing a task sends each request with ``Pooler-Lease: <runner>:<epoch>``; a runner that
takes a call back from a runner whose lease expired sends it under a higher epoch.  The store keeps
the highest epoch it has seen for each call (the caller's Idempotency-Key, which belongs to its
token as the key's stored answer does) and turns away, at its door, a request under a lower one:
the request of a runner that was frozen, or held up on the way, after its call was taken back.
A request without the header, or without a key, is not fenced.  The epochs are held in memory: a
store started again knows none (a repeat is then answered from its key's record, if any).
"""

from __future__ import annotations

import json
import threading

from pooler.store.idempotency import Idempotency

#: The header a fenced request carries.
HEADER = "Pooler-Lease"


class MalformedLease(ValueError):
    """The header is not ``<runner>:<epoch>`` with a whole-number epoch."""


class Fences:
    """The highest epoch seen for each (token, Idempotency-Key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], int] = {}

    def admit(self, token: str | None, key: str | None, lease: str | None) -> bytes | None:
        """None to let the request in (its epoch is the call's highest now), or the refusal's body.

        Raises ``MalformedLease`` for a header that cannot be read.
        """
        if key is None or lease is None:
            return None
        runner, sep, text = lease.strip().rpartition(":")
        if not sep or not runner or not text.isdigit():
            raise MalformedLease(f"{HEADER} is <runner>:<epoch>, the epoch a whole number - got {lease!r}")
        epoch = int(text)
        slot = (Idempotency.owner_of(token or ""), key)
        with self._lock:
            seen = self._seen.get(slot)
            if seen is None or epoch >= seen:
                self._seen[slot] = epoch
                return None
        error = (f"STALE_LEASE: the call of Idempotency-Key {key} was sent again under a newer lease "
                 f"(epoch {seen}) than this request's ({runner}, epoch {epoch}); this request was not "
                 "carried out.")
        return json.dumps({"ok": False, "error": error}, ensure_ascii=False).encode("utf-8")
