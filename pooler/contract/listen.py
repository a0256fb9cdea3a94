"""Where a server of pooler's (the reference store, ``pooler mcp --http``) may listen without a
token: on this machine only."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: localhost, 127.0.0.0/8 or ::1."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
