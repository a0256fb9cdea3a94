"""``pooler mcp --http``: the official SDK's streamable HTTP client against a real server process,
behind its bearer token, with the real reference store behind it."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
import requests
from helpers import ROOT, Store, pooler
from mcpkit import answer_of, connect_http, http_server, start_http

# Every test here talks to `pooler mcp` as an MCP client does: a server process of its own.
pytestmark = pytest.mark.process

ECHO = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "curl", "version": "1"}}}
DENIED = {"error": "invalid_token",
          "error_description": "pooler mcp needs Authorization: Bearer <token> on every request - the token "
                               "it printed when it started, or the one in its --http-token-file."}


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


def leaves(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups."""
    inner = getattr(error, "exceptions", None)
    if inner is None:
        return [error]
    return [leaf for one in inner for leaf in leaves(one)]


def ops_of(store: Store, unit: str = "MELBIS_AGENT_TEST") -> list[dict[str, Any]]:
    return [op for op in store.ops() if op["unit"] == unit]


def test_the_url_comes_first_and_a_made_token_second_and_the_sdk_client_is_served(store: Store,
                                                                                  out: Path) -> None:
    with http_server(store, out) as server:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", server.url)
        assert server.printed is not None
        assert re.fullmatch(r"token: [0-9a-f]{32}", server.printed)

        async def scenario() -> None:
            async with connect_http(server) as session:
                tools = sorted(t.name for t in (await session.list_tools()).tools)
                ran = answer_of(await session.call_tool("tool_run", {**ECHO, "params": {"n": 1}}))
                pooled = answer_of(await session.call_tool("tool_pool",
                                                           {"pool": [{**ECHO, "params": {"n": 2}}]}))
            assert tools == ["pool_run", "tool_list", "tool_pool", "tool_run"]
            assert ran["detail"] == {"n": 1}
            assert pooled["result"] is True
            assert pooled["steps"][0]["detail"] == {"n": 2}
            assert re.fullmatch(r"mcp-\d{8}-\d{6}-\d+-1", pooled["task"])
        anyio.run(scenario)
    assert len(ops_of(store)) == 2


def test_a_request_without_the_token_gets_401_and_opens_nothing(store: Store, out: Path) -> None:
    with http_server(store, out, token="http-token-0123456789abcdef") as server:
        assert server.printed is None
        headers = {"Accept": "application/json, text/event-stream"}
        bare = requests.post(server.url, json=INITIALIZE, headers=headers, timeout=30)
        wrong = requests.post(server.url, json=INITIALIZE, timeout=30,
                              headers={**headers, "Authorization": "Bearer http-token-0123456789abcdeX"})
        right = requests.post(server.url, json=INITIALIZE, timeout=30,
                              headers={**headers, "Authorization": "Bearer http-token-0123456789abcdef"})
        for denied in (bare, wrong):
            assert denied.status_code == 401
            assert denied.json() == DENIED
            assert denied.headers["www-authenticate"] == 'Bearer realm="pooler mcp"'
            assert "mcp-session-id" not in denied.headers
        assert right.status_code == 200
        assert right.headers["mcp-session-id"]

        async def scenario() -> None:
            with pytest.raises(BaseException) as caught:
                async with connect_http(server, token="not-the-token"):
                    pass
            assert [str(e) for e in leaves(caught.value)] == ["Server returned an error response"]
        anyio.run(scenario)
        err = server.stop()
    assert "http-token-0123456789abcdef" not in err
    assert ops_of(store) == []


def test_it_refuses_to_listen_beyond_loopback_without_a_token_file(store: Store, out: Path) -> None:
    token = out.parent / "token"
    token.write_text(store.token, encoding="utf-8")
    refused = pooler("mcp", "--http", "0.0.0.0:0", "--store", store.url, "--token-file", str(token),
                     "--out", str(out))
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        "pooler mcp: --http 0.0.0.0:0 is reachable from other machines, and no --http-token-file was "
        "given - write a long random token into a file and give it with --http-token-file, so that only its "
        "holders may call the server.\n")
    bad = pooler("mcp", "--http", "localhost", "--store", store.url, "--token-file", str(token))
    assert bad.returncode == 2
    assert bad.stderr == ("pooler mcp: --http takes HOST:PORT, like 127.0.0.1:8765 (port 0 picks a free "
                          "one), not 'localhost'\n")
    stray = pooler("mcp", "--http-token-file", str(token), "--store", store.url, "--token-file", str(token))
    assert stray.returncode == 2
    assert stray.stderr == ("pooler mcp: --http-token-file goes with --http HOST:PORT - over stdio the "
                            "client starts the server itself, and no token is asked for.\n")


def test_many_clients_at_once_each_have_their_own_task(store: Store, out: Path) -> None:
    keyed = {"pool": [{**ECHO, "key": "k1", "params": {"n": 1}}]}

    async def scenario(url_token: Any) -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []

        async def client() -> None:
            async with connect_http(url_token) as session:
                first = answer_of(await session.call_tool("tool_pool", keyed))
                again = answer_of(await session.call_tool("tool_pool", keyed))
                listed = answer_of(await session.call_tool("tool_list", {"unit": "MELBIS_AGENT_TEST"}))
                assert listed["result"] is True
                answers.extend([first, again])

        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(client)
        return answers

    with http_server(store, out) as server:
        answers = anyio.run(scenario, server)
    firsts, agains = answers[0::2], answers[1::2]
    assert len({a["task"] for a in firsts}) == 4
    assert [a["task"] for a in firsts] == [a["task"] for a in agains]
    assert {a["steps"][0]["status"] for a in firsts} == {"completed"}
    # Within one session the key holds: the second call skips it.
    assert {a["steps"][0]["status"] for a in agains} == {"skipped"}
    keys = sorted(op["idempotency_key"] for op in ops_of(store))
    assert keys == sorted(f"{a['task']}:k1" for a in firsts)


def test_progress_and_cancellation_work_as_over_stdio(store: Store, out: Path) -> None:
    sleep = {"unit": "MELBIS_AGENT_TEST", "command": "CmdSleep", "params": {"ms": 400}}
    slow = {"unit": "MELBIS_AGENT_TEST", "command": "CmdSleep", "params": {"ms": 1500}}

    async def scenario(server: Any) -> None:
        seen: list[tuple[float, str | None]] = []
        first_done = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, message))
            if progress >= 1:
                first_done.set()

        async with connect_http(server) as session:
            done = answer_of(await session.call_tool("tool_pool", {"pool": [sleep, sleep]},
                                                     progress_callback=on_progress))
            assert done["result"] is True
            first_done = anyio.Event()
            async with anyio.create_task_group() as group:
                async def call() -> None:
                    # The calls after the first are long: the cancel, sent once the first is told
                    # done, reaches the server well within the second even on a loaded machine.
                    await session.call_tool("tool_pool", {"pool": [sleep] + [slow] * 5},
                                            progress_callback=on_progress)

                group.start_soon(call)
                await first_done.wait()
                group.cancel_scope.cancel()
            # Pools take turns, so this answer comes once the cancelled pool has let go.
            after = answer_of(await session.call_tool("tool_pool", {"pool": [ECHO]}))
            assert after["result"] is True
        # The client hands progress to its callback on tasks of its own: all are in once it closed.
        first = sorted(seen)[:3]
        assert [p for p, _ in first] == [0, 0, 1]
        assert (0, f"task {done['task']}: 2 calls") in seen
        assert (2, "step 2 #2 MELBIS_AGENT_TEST.CmdSleep: completed") in seen

    with http_server(store, out) as server:
        anyio.run(scenario, server)
    # 2 of the first pool; of the cancelled one the first, perhaps the second (it may have left
    # before the cancel came), nothing after.
    assert len([op for op in ops_of(store) if op["command"] == "CmdSleep"]) in (3, 4)


GONE = textwrap.dedent("""
    import os, sys, anyio
    sys.path.insert(0, {tests!r})
    from mcpkit import HttpServer, connect_http

    async def main():
        server = HttpServer(url={url!r}, token={token!r}, proc=None, printed=None)
        async with connect_http(server) as session:
            async def on_progress(progress, total, message):
                if progress >= 1:
                    print("first step done", flush=True)
                    os._exit(0)  # gone: no cancel, no DELETE, the connection just drops
            await session.call_tool("tool_pool", {{"plan_id": {plan!r}}}, progress_callback=on_progress)

    anyio.run(main)
""")


def test_a_pool_whose_client_vanished_runs_to_its_end_and_a_second_commit_gets_its_answer(
        store: Store, out: Path) -> None:
    sleep = {"unit": "MELBIS_AGENT_TEST", "command": "CmdSleep", "params": {"ms": 500}}
    with http_server(store, out) as server:
        async def plan() -> dict[str, Any]:
            async with connect_http(server) as session:
                return answer_of(await session.call_tool("tool_pool", {"plan": True, "pool": [sleep] * 5}))

        planned = anyio.run(plan)
        script = GONE.format(tests=str(ROOT / "tests"), url=server.url, token=server.token,
                             plan=planned["plan_id"])
        gone = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              check=False)
        assert gone.stdout == "first step done\n", gone.stderr

        async def commit_again() -> tuple[dict[str, Any], dict[str, Any]]:
            async with connect_http(server) as session:
                meanwhile = answer_of(await session.call_tool("tool_pool", {"task": planned["task"]}))
                again = answer_of(await session.call_tool("tool_pool", {"plan_id": planned["plan_id"]}))
                return meanwhile, again

        meanwhile, answer = anyio.run(commit_again)
        err = server.stop()
    # The vanished client's session ended without a trace on the server's side.
    assert "Traceback" not in err
    # The second commit came while the first still ran, and waited for its end.
    assert meanwhile["status"] == "running"
    assert answer["result"] is True
    assert answer["task"] == planned["task"]
    assert [s["status"] for s in answer["steps"]] == ["completed"] * 5
    assert len([op for op in ops_of(store) if op["command"] == "CmdSleep"]) == 5


def test_a_token_file_others_can_read_is_warned_of_and_its_token_never_shown(store: Store, out: Path) -> None:
    server = start_http(store, out, token="http-token-0123456789abcdef", token_mode=0o644)
    err = server.stop()
    path = out.parent / "http-token"
    assert (f"pooler mcp: WARNING: the token file {path} can be read by others (mode 644) - "
            f"chmod 600 {path}") in err.splitlines()
    assert "http-token-0123456789abcdef" not in err


RIGHT = "Bearer http-token-0123456789abcdef"
REBINDING = ("pooler mcp does not answer to Host 'evil.example.com': it answers to the address it listens "
             "on, and to the hosts of --allow-origin (DNS rebinding protection)")


def post(server: Any, **headers: str) -> requests.Response:
    return requests.post(server.url, json=INITIALIZE, timeout=30,
                         headers={"Accept": "application/json, text/event-stream", **headers})


def rpc_error(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}


def test_a_foreign_origin_or_host_gets_403_after_the_token_is_checked(store: Store, out: Path) -> None:
    with http_server(store, out, token="http-token-0123456789abcdef") as server:
        port = server.url.split(":")[2].split("/")[0]
        foreign_origin = post(server, Authorization=RIGHT, Origin="https://evil.example.com")
        foreign_host = post(server, Authorization=RIGHT, Host="evil.example.com")
        rebound = post(server, Authorization=RIGHT, Host=f"evil.example.com:{port}",
                       Origin=f"http://evil.example.com:{port}")
        # The token first: a wrong token is 401 whatever the Host and Origin say.
        wrong = post(server, Authorization="Bearer nope", Host="evil.example.com",
                     Origin="https://evil.example.com")
        own = [post(server, Authorization=RIGHT, Host=f"{name}:{port}", Origin=f"http://{name}:{port}")
               for name in ("127.0.0.1", "localhost", "[::1]")]
        bare = post(server, Authorization=RIGHT)
    assert foreign_origin.status_code == 403
    assert foreign_origin.json() == rpc_error(
        "pooler mcp does not answer to pages of Origin 'https://evil.example.com': give it with "
        "--allow-origin to let them call")
    assert foreign_host.status_code == 403
    assert foreign_host.json() == rpc_error(REBINDING)
    assert rebound.status_code == 403
    assert "mcp-session-id" not in foreign_origin.headers
    assert wrong.status_code == 401
    assert wrong.json() == DENIED
    assert [r.status_code for r in own] == [200, 200, 200]
    assert bare.status_code == 200
    assert ops_of(store) == []


def test_an_allowed_origin_and_a_proxy_passing_its_host_are_served(store: Store, out: Path) -> None:
    with http_server(store, out, "--allow-origin", "https://Pooler.example.com",
                     token="http-token-0123456789abcdef") as server:
        proxied = post(server, Authorization=RIGHT, Host="pooler.example.com",
                       Origin="https://pooler.example.com")
        other = post(server, Authorization=RIGHT, Host="pooler.example.com", Origin="https://other.example.com")
    assert proxied.status_code == 200
    assert proxied.headers["mcp-session-id"]
    assert other.status_code == 403


def test_an_unsupported_protocol_version_gets_400(store: Store, out: Path) -> None:
    with http_server(store, out, token="http-token-0123456789abcdef") as server:
        old = post(server, Authorization=RIGHT, **{"MCP-Protocol-Version": "2024-01-01"})
        known = post(server, Authorization=RIGHT, **{"MCP-Protocol-Version": "2025-06-18"})
    assert old.status_code == 400
    assert old.json() == rpc_error(
        "Unsupported MCP-Protocol-Version '2024-01-01' - pooler mcp speaks 2024-11-05, 2025-03-26, "
        "2025-06-18, 2025-11-25, 2026-07-28")
    assert known.status_code == 200


def test_a_bad_allow_origin_is_refused_before_listening(store: Store, out: Path) -> None:
    token = out.parent / "token"
    token.write_text(store.token, encoding="utf-8")
    bad = pooler("mcp", "--http", "127.0.0.1:0", "--allow-origin", "evil.example.com/x", "--store", store.url,
                 "--token-file", str(token), "--out", str(out))
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr == ("pooler mcp: --allow-origin takes an origin as a browser sends it, like "
                          "https://tools.example.com or http://localhost:3000, not 'evil.example.com/x'\n")
    stray = pooler("mcp", "--allow-origin", "https://a.example.com", "--store", store.url,
                   "--token-file", str(token))
    assert stray.returncode == 2
    assert stray.stderr == ("pooler mcp: --allow-origin goes with --http HOST:PORT - over stdio no web page "
                            "can reach the server.\n")
