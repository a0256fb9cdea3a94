"""The store a task belongs to, as the journal records it: the URL normalized, never a secret.

``HTTP://Shop.Example:443/`` and ``http://shop.example:80`` are one store each time they are
written another way; a user name or password in the URL and its query are left out.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def store_identity(url: str) -> str:
    """``scheme://host[:port]/path`` in lower case (the path as written), without a trailing
    slash, a default port, a user, a password, a query or a fragment."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))
