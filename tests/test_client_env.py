"""The client reads its proxy and CA bundle from the environment once, when it is made."""

from __future__ import annotations

import base64
import importlib.util
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from frontdoor import FrontDoor
from helpers import Store
from proxykit import ForwardProxy

from pooler.client.http import ToolRunClient
from pooler.errors import StoreError, UsageError

PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
              "NO_PROXY", "no_proxy", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
TEST = "MELBIS_AGENT_TEST"


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    found = ForwardProxy()
    yield found
    found.close()


@pytest.fixture
def door(store: Store, tmp_path: Path) -> Iterator[FrontDoor]:
    """The store behind TLS, its certificate signed by itself (tmp_path/tls/cert.pem)."""
    found = FrontDoor(store.url, tmp_path / "tls")
    yield found
    found.close()


def dead_proxy() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_proxy_in_the_environment_is_used(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    with ToolRunClient(store.url, store.token) as client, pytest.raises(StoreError) as caught:
        client.tool_run("MELBIS_AGENT_TEST", "CmdEcho", {"n": 1})
    assert caught.value.message == (
        f"cannot reach the store at {store.url.rstrip('/')}/: the proxy refused the connection"
    )
    assert caught.value.sent is False
    monkeypatch.delenv("HTTP_PROXY")  # the test's own look at the store goes direct
    assert store.ops() == []


def test_no_proxy_naming_the_store_bypasses_the_proxy(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with ToolRunClient(store.url, store.token) as client:
        reply = client.tool_run("MELBIS_AGENT_TEST", "CmdEcho", {"n": 1})
    assert reply.result is True
    assert reply.data["detail"] == {"n": 1}


def test_the_environment_is_read_once_when_the_client_is_made(store: Store,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with ToolRunClient(store.url, store.token) as client:
        monkeypatch.setenv("HTTP_PROXY", dead_proxy())
        replies = [client.tool_run("MELBIS_AGENT_TEST", "CmdEcho", {"n": n}) for n in range(3)]
    assert [r.data["detail"]["n"] for r in replies] == [0, 1, 2]
    monkeypatch.delenv("HTTP_PROXY")
    assert len(store.ops()) == 3


def test_a_call_goes_through_the_environments_proxy_with_the_proxys_own_credentials(
        store: Store, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    port = proxy.url.rsplit(":", 1)[1]
    monkeypatch.setenv("http_proxy", f"http://us%40er:p%3Ass@127.0.0.1:{port}")
    with ToolRunClient(store.url + "/", store.token) as client:
        replies = [client.tool_run(TEST, "CmdEcho", {"n": n}) for n in range(2)]
    assert [r.data["detail"] for r in replies] == [{"n": 0}, {"n": 1}]
    basic = "Basic " + base64.b64encode(b"us@er:p:ss").decode()
    assert proxy.asked() == [(f"POST {store.url}/tool_run HTTP/1.1", basic)] * 2
    monkeypatch.delenv("http_proxy")
    assert len(store.ops()) == 2


def test_all_proxy_serves_a_store_no_scheme_proxy_is_named_for(
        store: Store, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", proxy.url.removeprefix("http://"))
    with ToolRunClient(store.url, store.token) as client:
        assert client.tool_run(TEST, "CmdEcho", {"n": 1}).data["detail"] == {"n": 1}
    assert proxy.asked() == [(f"POST {store.url}/tool_run HTTP/1.1", None)]


def test_an_https_store_is_reached_through_a_tunnel_the_proxy_opens(
        store: Store, door: FrontDoor, proxy: ForwardProxy, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "tls" / "cert.pem"))
    with ToolRunClient(door.url, store.token) as client:
        assert client.tool_run(TEST, "CmdEcho", {"n": 1}).data["detail"] == {"n": 1}
    # The tunnel's own HTTP version is the standard library's (1.0 before Python 3.12, 1.1 after).
    ((line, auth),) = proxy.asked()
    assert (line.rsplit(" ", 1)[0], auth) == (f"CONNECT {door.url.removeprefix('https://')}", None)
    assert line.rsplit(" ", 1)[1] in ("HTTP/1.0", "HTTP/1.1")


def test_no_proxy_naming_the_stores_network_bypasses_the_proxy(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    monkeypatch.setenv("no_proxy", "10.0.0.0/8, 127.0.0.0/8")
    with ToolRunClient(store.url, store.token) as client:
        assert client.tool_run(TEST, "CmdEcho", {"n": 1}).data["detail"] == {"n": 1}


@pytest.mark.parametrize("named", ["127.0.0.1:{port}", "LOCALHOST:{port}", ".localhost", "*"])
def test_no_proxy_naming_the_stores_host_and_port_or_its_domain_bypasses_the_proxy(
        store: Store, monkeypatch: pytest.MonkeyPatch, named: str) -> None:
    port = store.url.rstrip("/").rsplit(":", 1)[1]
    url = store.url.replace("127.0.0.1", "localhost") if "localhost" in named.lower() else store.url
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    monkeypatch.setenv("no_proxy", named.format(port=port))
    with ToolRunClient(url, store.token) as client:
        assert client.tool_run(TEST, "CmdEcho", {"n": 1}).data["detail"] == {"n": 1}


@pytest.mark.parametrize("named", ["127.0.0.1:1", "host.localhost", "calhost"])
def test_no_proxy_naming_another_port_or_a_name_the_store_is_not_under_leaves_the_proxy_in_use(
        store: Store, monkeypatch: pytest.MonkeyPatch, named: str) -> None:
    url = store.url if named[0].isdigit() else store.url.replace("127.0.0.1", "localhost")
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    monkeypatch.setenv("no_proxy", named)
    with ToolRunClient(url, store.token) as client, pytest.raises(StoreError) as caught:
        client.tool_run(TEST, "CmdEcho", {"n": 1})
    assert caught.value.message.endswith(": the proxy refused the connection")


def test_no_proxy_naming_other_hosts_leaves_the_proxy_in_use(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", dead_proxy())
    monkeypatch.setenv("NO_PROXY", "example.com,10.0.0.0/8,127.0.0.2")
    with ToolRunClient(store.url, store.token) as client, pytest.raises(StoreError) as caught:
        client.tool_run(TEST, "CmdEcho", {"n": 1})
    assert caught.value.message.endswith(": the proxy refused the connection")
    assert caught.value.sent is False


def test_a_certificate_no_bundle_vouches_for_is_refused_before_anything_is_sent(
        store: Store, door: FrontDoor) -> None:
    with ToolRunClient(door.url, store.token) as client, pytest.raises(StoreError) as caught:
        client.tool_run(TEST, "CmdEcho", {"n": 1})
    assert caught.value.message == (f"cannot reach the store at {door.url}/: TLS failed (certificate verify"
                                    " failed: self-signed certificate)")
    assert caught.value.sent is False
    assert store.ops() == []


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_the_ca_bundle_the_environment_names_vouches_for_the_store(
        variable: str, store: Store, door: FrontDoor, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, str(tmp_path / "tls" / "cert.pem"))
    with ToolRunClient(door.url, store.token) as client:
        assert client.tool_run(TEST, "CmdEcho", {"n": 1}).data["detail"] == {"n": 1}


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
def test_verify_off_takes_any_certificate(store: Store, door: FrontDoor) -> None:
    with ToolRunClient(door.url, store.token, verify=False) as client:
        assert client.tool_run(TEST, "CmdEcho", {"n": 1}).data["detail"] == {"n": 1}


def test_a_ca_bundle_that_is_not_there_is_refused_when_the_client_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone.pem"
    monkeypatch.setenv("CURL_CA_BUNDLE", str(gone))
    with pytest.raises(UsageError) as caught:
        ToolRunClient("https://127.0.0.1:1", "t")
    assert caught.value.message == (
        f"the CA bundle {gone} (REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE) that would check the certificate"
        " of the store at https://127.0.0.1:1/ does not exist"
    )
    # A plain http store has no certificate to check: the bundle is not looked at.
    ToolRunClient("http://127.0.0.1:1", "t").close()


def test_a_socks_proxy_without_pysocks_is_refused_when_the_client_is_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("socks") is not None:
        pytest.skip("PySocks is installed here: a SOCKS proxy would be used")
    monkeypatch.setenv("all_proxy", "socks5://user:s3cret@127.0.0.1:1080")
    with pytest.raises(UsageError) as caught:
        ToolRunClient("http://127.0.0.1:1", "t")
    assert caught.value.message == (
        "the environment names a SOCKS proxy for the store at http://127.0.0.1:1/, which needs the PySocks"
        " package - pip install pysocks, or set no_proxy to the store's host"
    )


def test_a_proxy_of_another_kind_is_refused_when_the_client_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "ftp://user:s3cret@127.0.0.1:21")
    with pytest.raises(UsageError) as caught:
        ToolRunClient("http://127.0.0.1:1", "t")
    assert caught.value.message == (
        "the proxy the environment names for the store at http://127.0.0.1:1/ (http_proxy, https_proxy or"
        " all_proxy) is neither an http(s) nor a socks proxy"
    )
