"""What a transport failure means: was the request never sent, or is its fate unknown?

urllib3's exceptions wrap the socket's, and some wrap each other; the cause that decides is found
by walking the whole chain.
"""

from __future__ import annotations

import re

from urllib3.exceptions import NameResolutionError, NewConnectionError, ReadTimeoutError


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it wraps (args, reason, cause, context), depth first."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        cur = todo.pop()
        if any(cur is s for s in seen) or len(seen) > 20:
            continue
        seen.append(cur)
        todo.extend(a for a in cur.args if isinstance(a, BaseException))
        for attr in ("reason", "__cause__", "__context__"):
            nxt = getattr(cur, attr, None)
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return seen


def connect_failure(exc: BaseException, host: str) -> str | None:
    """What went wrong while connecting, or ``None`` when the connection was made (sent or in doubt)."""
    chain = causes(exc)
    if not any(isinstance(c, NewConnectionError) for c in chain):
        return None
    for cur in chain:
        if isinstance(cur, NameResolutionError):
            return f"the host name {host} is not known"
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, TimeoutError):
            return "no connection in time"
    for cur in chain:
        if isinstance(cur, OSError) and cur.strerror:
            return cur.strerror.lower()
    return "no connection could be made"


def is_timeout(exc: BaseException) -> bool:
    return any(isinstance(c, ReadTimeoutError | TimeoutError) for c in causes(exc))


def tls_reason(exc: BaseException) -> str:
    text = str(exc)
    found = re.search(r"\] ([^()\]]+?)(?: \(_ssl\.c:\d+\))", text)
    if found:
        return found.group(1).strip()
    return "the secure connection could not be set up"
