"""How a client reaches its store: one urllib3 connection pool, set up once when the client is made.

The environment is read here, once: the proxy variables (``http_proxy``, ``https_proxy``,
``all_proxy`` and ``no_proxy``, lower case before upper case, as curl and requests read them) and the
CA bundle (``REQUESTS_CA_BUNDLE``, then ``CURL_CA_BUNDLE``).  Without a bundle named, the store's
certificate is checked against certifi's, the bundle requests checks against.  Nothing else of the
environment is read: not ``~/.netrc`` (the token is the one credential sent), and a user and password
in the store's URL are never sent.

Every connection of the pool is known to the deadline's watchdog (``deadline.watched``) and runs the
caller's hook just before its first byte (``sendgate.gated``).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import certifi
from urllib3 import PoolManager, ProxyManager
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import DependencyWarning, LocationValueError
from urllib3.util import make_headers

from pooler.client.deadline import watched
from pooler.client.sendgate import gated
from pooler.errors import UsageError

#: What a path keeps unquoted (requests' ``requote_uri``): a store's path goes out as requests sent it.
_PATH_SAFE = "!#$%&'()*+,/:;=?@[]~"


@dataclass(frozen=True)
class Route:
    """The pool every call of a client goes through, and where in the store its endpoints are."""

    pool: HTTPConnectionPool
    #: Put before an endpoint's name in the request line: the store's path, or through a plain
    #: HTTP proxy its whole URL (without a user or password).
    base: str
    manager: PoolManager

    def target(self, endpoint: str) -> str:
        return f"{self.base}/{endpoint}"


def open_route(url: str, *, verify: bool, pool_size: int, shown: str) -> Route:
    """The route to the store at ``url`` (``shown`` is how messages name it); ``UsageError`` for a
    proxy or CA bundle in the environment that cannot be used."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        # What urllib3 checks only as it connects, and then fails the call as if it had been sent.
        host.encode("idna")
    except UnicodeError:
        raise UsageError(f"the store's address {shown} names a host no lookup can take ({host}: a part"
                         " between dots is empty or longer than 63 characters)") from None
    path = quote(parts.path.rstrip("/"), safe=_PATH_SAFE)
    proxy = environment_proxy(url)
    sizes: dict[str, Any] = {"num_pools": 1, "maxsize": pool_size, "block": False}
    base = path
    if proxy is None:
        manager = PoolManager(**sizes)
    elif not urlsplit(proxy).hostname:
        raise UsageError(f"the proxy the environment names for the store at {shown} (http_proxy, https_proxy"
                         " or all_proxy) has no host")
    elif proxy.lower().startswith("socks"):
        manager = _socks(proxy, shown, sizes)
    else:
        user, password = _credentials(proxy)
        auth = make_headers(proxy_basic_auth=f"{user}:{password}") if user else {}
        try:
            manager = ProxyManager(proxy, proxy_headers=auth, **sizes)
        except LocationValueError:
            raise UsageError(f"the proxy the environment names for the store at {shown} (http_proxy,"
                             " https_proxy or all_proxy) is neither an http(s) nor a socks proxy") from None
        if parts.scheme == "http":
            # A plain HTTP proxy is asked for the whole URL; an https store is reached through a
            # tunnel the proxy opens, and is asked for its path.
            port = f":{parts.port}" if parts.port else ""
            netloc = f"[{host}]" if ":" in host else host
            base = f"http://{netloc}{port}{path}"
    tls = _tls(verify, shown) if parts.scheme == "https" else {}
    pool = manager.connection_from_host(host, parts.port, parts.scheme, pool_kwargs=tls)
    # Every call's connection is known to the deadline's watchdog, and runs the send gate's hook.
    pool.ConnectionCls = gated(watched(pool.ConnectionCls))
    return Route(pool, base, manager)


def accept_encoding() -> str:
    """What the client says it can decode, as requests said it: what urllib3 decodes here."""
    found: str = make_headers(accept_encoding=True)["accept-encoding"]
    return ", ".join(found.split(","))


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, or None: none named, or ``no_proxy`` names it."""
    parts = urlsplit(url)
    host = parts.hostname
    if host is None or _bypassed(host, parts.port):
        return None
    found = urllib.request.getproxies()
    for key in (f"{parts.scheme}://{host}", parts.scheme, f"all://{host}", "all"):
        if found.get(key):
            proxy = found[key]
            return proxy if "://" in proxy else f"http://{proxy}"
    return None


def _bypassed(host: str, port: int | None) -> bool:
    """Whether ``no_proxy`` names the host: a network (10.0.0.0/8) holding its address, as requests
    reads it; else as the standard library matches names (an address, a domain and the names
    under it, with or without the port, any case, ``*`` for every host)."""
    address = _ipv4(host)
    if address is not None:
        named = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
        for entry in named.replace(" ", "").split(","):
            network = _network(entry) if "/" in entry else None
            if network is not None and address in network:
                return True
    try:
        return bool(urllib.request.proxy_bypass(f"{host}:{port}" if port else host))
    except (TypeError, socket.gaierror):
        return False


def _ipv4(host: str) -> ipaddress.IPv4Address | None:
    try:
        return ipaddress.IPv4Address(host)
    except ValueError:
        return None


def _network(entry: str) -> ipaddress.IPv4Network | None:
    try:
        network = ipaddress.IPv4Network(entry, strict=False)
    except ValueError:
        return None
    # As requests reads no_proxy: a network of at least one bit, never "every address".
    return network if network.prefixlen >= 1 else None


def _credentials(proxy: str) -> tuple[str, str]:
    parts = urlsplit(proxy)
    return unquote(parts.username or ""), unquote(parts.password or "")


def _socks(proxy: str, shown: str, sizes: dict[str, Any]) -> PoolManager:
    try:
        with warnings.catch_warnings():
            # The refusal below says what urllib3's warning would, and what to do.
            warnings.simplefilter("ignore", DependencyWarning)
            from urllib3.contrib.socks import SOCKSProxyManager  # noqa: PLC0415 - needs PySocks
    except ImportError:
        raise UsageError(f"the environment names a SOCKS proxy for the store at {shown}, which needs the"
                         " PySocks package - pip install pysocks, or set no_proxy to the store's host"
                         ) from None
    user, password = _credentials(proxy)
    manager: PoolManager = SOCKSProxyManager(proxy, username=user or None, password=password or None,
                                             **sizes)
    return manager


def _tls(verify: bool, shown: str) -> dict[str, Any]:
    if not verify:
        return {"cert_reqs": "CERT_NONE"}
    named = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    bundle = Path(named or certifi.where())
    if not bundle.exists():
        source = "REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE" if named else "certifi"
        raise UsageError(f"the CA bundle {bundle} ({source}) that would check the certificate of the store"
                         f" at {shown} does not exist")
    where = "ca_cert_dir" if bundle.is_dir() else "ca_certs"
    return {"cert_reqs": "CERT_REQUIRED", where: str(bundle)}

