"""ToolRunClient against the real reference store: JSON and multipart, refusals, transport failures."""

from __future__ import annotations

import datetime
import hashlib
import json
import socket
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Store

from pooler.client.http import Attachment, ToolRunClient
from pooler.errors import InputError, StoreError, UsageError

TEST = "MELBIS_AGENT_TEST"
IN_DOUBT = "the call may or may not have been carried out"
CLOSED = "closed the connection before answering"
SECRET = "s3cr3t-Token-4711"
CRASH_TEXT = "MELBIS_AGENT_TEST\\CmdCrash failed: CmdCrash broke off, as it always does"
DENIED_TEXT = "ACCESS_DENIED: the token is not known to this store (HTTP 401 Unauthorized)"
GARBAGE_TEXT = '<html><body><h1>502 Bad Gateway</h1></body></html>\n{"ok": tr'


@pytest.fixture
def client(store: Store) -> Iterator[ToolRunClient]:
    with ToolRunClient(store.url, store.token) as c:
        yield c


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def shown(url: str) -> str:
    return url.rstrip("/") + "/"


def test_tool_run_json_echo(client: ToolRunClient, store: Store) -> None:
    reply = client.tool_run(TEST, "CmdEcho", {"name": "Euro", "n": 3, "tags": ["a", "ü"], "x": {"y": None}})
    assert reply.status == 200
    assert reply.result is True
    assert reply.data["detail"] == {"name": "Euro", "n": 3, "tags": ["a", "ü"], "x": {"y": None}}
    assert list(reply.data)[:5] == ["result", "message", "detail", "tables", "files"]
    assert isinstance(reply.server_ms, int)
    assert isinstance(reply.module_ms, int)
    assert reply.trip_ms >= reply.server_ms
    assert reply.time() == {"server": reply.server_ms, "module": reply.module_ms, "trip": reply.trip_ms}
    assert reply.sql is None
    assert store.ops()[-1]["params"] == {"name": "Euro", "n": 3, "tags": ["a", "ü"], "x": {"y": None}}


def test_tables_come_back_as_row_lists(client: ToolRunClient) -> None:
    reply = client.tool_run(TEST, "CmdTable", {"rows": 5, "width": 4})
    rows = reply.data["tables"]["rows"]
    assert len(rows) == 5
    assert all(isinstance(r, dict) for r in rows)


def test_a_command_refusal_is_a_reply(client: ToolRunClient) -> None:
    reply = client.tool_run("MELBIS_AGENT_CURRENCY", "CmdNope")
    assert reply.result is False
    assert reply.message.startswith("Unknown command [CmdNope]. The tool has: CmdList")
    failed = client.tool_run(TEST, "CmdFail")
    assert failed.status == 200
    assert failed.result is False


def test_tool_list(client: ToolRunClient) -> None:
    everything = client.tool_list()
    units = [t["unit"] for t in everything.data["tools"]]
    assert {"MELBIS_AGENT_CURRENCY", "MELBIS_AGENT_TEST", "MELBIS_AGENT_IMPORT_FILES"} <= set(units)
    one = client.tool_list("MELBIS_AGENT_CURRENCY")
    assert [t["unit"] for t in one.data["tools"]] == ["MELBIS_AGENT_CURRENCY"]


def test_debug_adds_sql_to_the_time(client: ToolRunClient) -> None:
    reply = client.tool_run("MELBIS_AGENT_CURRENCY", "CmdList", debug=True)
    assert reply.result is True
    assert isinstance(reply.sql, int)
    assert reply.sql >= 1
    assert reply.sql_ms is not None
    assert list(reply.time()) == ["server", "module", "trip", "sql", "sql_ms"]
    plain = client.tool_run("MELBIS_AGENT_CURRENCY", "CmdList")
    assert list(plain.time()) == ["server", "module", "trip"]


def test_idempotency_key_reaches_the_store(client: ToolRunClient, store: Store) -> None:
    first = client.tool_run(TEST, "CmdEcho", {"a": 1}, idempotency_key="task-7:row-1")
    assert store.ops()[-1]["idempotency_key"] == "task-7:row-1"
    count = len(store.ops())
    again = client.tool_run(TEST, "CmdEcho", {"a": 1}, idempotency_key="task-7:row-1")
    assert again.data == first.data
    assert len(store.ops()) == count
    client.tool_run(TEST, "CmdEcho", {"a": 2}, idempotency_key="задача:1 %")
    assert store.ops()[-1]["idempotency_key"] == "%D0%B7%D0%B0%D0%B4%D0%B0%D1%87%D0%B0:1%20%"
    client.tool_run(TEST, "CmdEcho", {"a": 3})
    assert store.ops()[-1]["idempotency_key"] is None


def test_a_store_stopped_before_it_kept_a_keys_answer_has_not_recorded_the_call_either(
        client: ToolRunClient, store: Store) -> None:
    keeper = store.served.engine.idempotency

    def stopped(*args: Any) -> None:
        raise RuntimeError("the store's process ends here")

    # The store's process ends as the command has run and its key's answer is to be kept ...
    keeper.keep = stopped
    with pytest.raises(RuntimeError):
        store.served.engine.tool_run(store.token, {"unit": TEST, "command": "CmdEcho", "params": {"a": 1}},
                                     idempotency_key="task-7:row-1")
    del keeper.keep
    # ... so the call's record went with it, and the repeat its client sends is carried out once.
    again = client.tool_run(TEST, "CmdEcho", {"a": 1}, idempotency_key="task-7:row-1")
    assert again.result is True
    assert [op["idempotency_key"] for op in store.ops()] == ["task-7:row-1"]


def add_goods(client: ToolRunClient, sku: str) -> int:
    reply = client.tool_run("MELBIS_AGENT_STORE", "CmdAdd", {"sku": sku, "name": f"Goods {sku}"})
    assert reply.result is True, reply.message
    elem: int = reply.data["detail"]["id"]
    return elem


def test_multipart_attachments(client: ToolRunClient, store: Store, tmp_path: Path) -> None:
    elem = add_goods(client, "A-1")
    front = tmp_path / "1532_front.jpg"
    front.write_bytes(bytes(range(256)) * 40)
    back = tmp_path / 'фото "back side".png'
    back.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\r\n--" * 1000)
    files = [
        # A "part" of the caller's own never replaces the part the client names.
        Attachment(front, {"entity": "store", "elem_id": elem, "real_name": "Front view", "part": "data_9"}),
        Attachment(back, {"entity": "store", "elem_id": elem, "kind_key": "kGallery", "angle": 90}),
    ]
    reply = client.tool_run("MELBIS_AGENT_IMPORT_FILES", "CmdAdd", {"profile": "catalog"}, files=files)
    assert reply.result is True, reply.message
    assert reply.data["detail"]["taken"] == 2
    taken = reply.data["files"]
    assert [f["real_name"] for f in taken] == ["Front view", 'фото "back side".png']
    assert [f["size"] for f in taken] == [front.stat().st_size, back.stat().st_size]
    assert [f["kind_key"] for f in taken] == ["kBase", "kGallery"]
    assert taken[1]["angle"] == 90
    for row, src in zip(taken, (front, back), strict=True):
        kept = store.root / row["path"] / row["file_name"]
        assert kept.read_bytes() == src.read_bytes()
    assert store.ops()[-1]["params"]["profile"] == "catalog"
    # The local paths stay on this machine: only the parts' bytes and base names travel.
    assert str(tmp_path) not in json.dumps(store.ops(), ensure_ascii=False)


def test_a_big_attachment_is_streamed_from_disk(store_factory: Callable[..., Store], tmp_path: Path) -> None:
    st = store_factory("--max-file-kb", "200000")
    big = tmp_path / "big.bin"
    block = hashlib.sha256(b"x").digest() * 32768  # 1 MB
    with big.open("wb") as fh:
        for _ in range(40):
            fh.write(block)
    with ToolRunClient(st.url, st.token) as c:
        elem = add_goods(c, "BIG")
        tracemalloc.start()
        try:
            reply = c.tool_run("MELBIS_AGENT_IMPORT_FILES", "CmdAdd",
                               files=[Attachment(big, {"entity": "store", "elem_id": elem})])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert reply.result is True, reply.message
    assert reply.data["files"][0]["size"] == 40 * 1024 * 1024
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes: the file was read into memory"


def test_what_cannot_be_sent_is_refused_before_sending(tmp_path: Path) -> None:
    port = closed_port()
    with ToolRunClient(f"http://127.0.0.1:{port}") as c:
        with pytest.raises(InputError) as date:
            c.tool_run("MELBIS_AGENT_ORDER", "CmdAdd", {"when": datetime.date(2026, 9, 18)})
        assert date.value.message == (
            "the call to MELBIS_AGENT_ORDER\\CmdAdd holds a value JSON cannot carry"
            " (Object of type date is not JSON serializable) - write dates and times as quoted strings,"
            " and numbers as finite numbers"
        )
        with pytest.raises(InputError) as nan:
            c.tool_run(TEST, "CmdEcho", {"x": float("nan")})
        assert nan.value.message.startswith("the call to MELBIS_AGENT_TEST\\CmdEcho holds a number JSON")
        gone = tmp_path / "gone.jpg"
        with pytest.raises(InputError) as missing:
            c.tool_run("MELBIS_AGENT_IMPORT_FILES", "CmdAdd", files=[Attachment(gone, {})])
        assert missing.value.message == f"No such file: {gone}"


def test_crash_is_a_refusal_as_text(client: ToolRunClient) -> None:
    reply = client.tool_run(TEST, "CmdCrash")
    assert reply.status == 500
    assert reply.data == {"result": False, "message": CRASH_TEXT}
    assert reply.time() == {"trip": reply.trip_ms}


def test_no_result_is_a_refusal_as_text(client: ToolRunClient) -> None:
    reply = client.tool_run(TEST, "CmdNoResult")
    assert reply.status == 500
    assert reply.data == {"result": False,
                          "message": "MELBIS_AGENT_TEST\\CmdNoResult answered without result"}


def test_wrong_token_is_a_refusal(store: Store) -> None:
    with ToolRunClient(store.url, SECRET) as c:
        reply = c.tool_run(TEST, "CmdEcho", {"a": 1})
    assert reply.status == 401
    assert reply.data == {"result": False, "message": DENIED_TEXT}
    assert SECRET not in repr(reply)


def test_no_token_is_a_refusal(store: Store) -> None:
    with ToolRunClient(store.url) as c:
        reply = c.tool_run(TEST, "CmdEcho")
    assert reply.status == 401
    assert reply.result is False
    assert reply.message.startswith("ACCESS_DENIED: ")


def test_connection_refused_is_not_sent(tmp_path: Path) -> None:
    port = closed_port()
    url = f"http://127.0.0.1:{port}"
    with ToolRunClient(url, SECRET) as c, pytest.raises(StoreError) as info:
        c.tool_run(TEST, "CmdEcho", {"a": 1})
    err = info.value
    assert str(err) == f"cannot reach the store at http://127.0.0.1:{port}/: connection refused"
    assert err.sent is False
    assert err.store == url
    assert SECRET not in str(err)
    assert SECRET not in repr(err)
    assert SECRET not in repr(c)
    # Nothing chained: requests' own exception carries the request with its token header.
    assert err.__cause__ is None
    assert err.__context__ is None


def test_tls_to_a_plain_store_is_not_sent(store: Store) -> None:
    url = store.url.replace("http://", "https://")
    with ToolRunClient(url, SECRET, connect_timeout=5) as c, pytest.raises(StoreError) as info:
        c.tool_run(TEST, "CmdEcho", {"a": 1})
    assert info.value.sent is False
    assert str(info.value).startswith(f"cannot reach the store at {shown(url)}: TLS failed (")
    assert SECRET not in str(info.value)
    assert store.ops() == []


def test_connect_timeout_is_not_sent() -> None:
    # A listener that never accepts, with its backlog full: the next connection never completes.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        with ToolRunClient(f"http://127.0.0.1:{port}", connect_timeout=0.3) as c, \
                pytest.raises(StoreError) as info:
            c.tool_run(TEST, "CmdEcho")
    finally:
        for s in fillers:
            s.close()
        listener.close()
    assert info.value.sent is False
    assert str(info.value) == (
        f"cannot reach the store at http://127.0.0.1:{port}/: no connection within 0.3 s"
    )


def test_bad_store_address_and_token() -> None:
    with pytest.raises(UsageError) as info:
        ToolRunClient("127.0.0.1:8080")
    assert info.value.message == (
        "the store's address '127.0.0.1:8080' is not an http(s) URL - write it like http://127.0.0.1:8080"
    )
    with pytest.raises(UsageError) as tok:
        ToolRunClient("http://127.0.0.1:1", "abc\ndef")
    assert tok.value.message == (
        "the token holds a space, a line break or a character a header cannot carry -"
        " check the token file holds the token alone"
    )
    assert "abc" not in repr(tok.value)


def test_a_host_name_no_lookup_can_take_is_refused_when_the_client_is_made() -> None:
    with pytest.raises(UsageError) as info:
        ToolRunClient("http://shop..example.com:8080/", "t")
    assert info.value.message == (
        "the store's address http://shop..example.com:8080/ names a host no lookup can take"
        " (shop..example.com: a part between dots is empty or longer than 63 characters)"
    )


def test_password_in_the_url_is_never_shown() -> None:
    port = closed_port()
    with ToolRunClient(f"http://user:pa55word@127.0.0.1:{port}/base/") as c:
        assert repr(c) == f"ToolRunClient(store='http://127.0.0.1:{port}/base/')"
        with pytest.raises(StoreError) as info:
            c.tool_list()
    assert "pa55word" not in str(info.value)
    assert info.value.store == f"http://127.0.0.1:{port}/base"


def test_answer_over_the_cap(store: Store) -> None:
    with ToolRunClient(store.url, store.token, max_answer_bytes=1024 * 1024) as c:
        with pytest.raises(StoreError) as info:
            c.tool_run(TEST, "CmdTable", {"rows": 20000, "width": 100})
        assert info.value.sent is True
        assert str(info.value) == (
            f"the store at {shown(store.url)} sent an answer over 1 MB, more than this client takes in"
            f" (ask for fewer rows, or raise max_answer_bytes); {IN_DOUBT}"
        )
        # The connection is not left in a broken state: the next call works.
        assert c.tool_run(TEST, "CmdEcho", {"a": 1}).result is True


def test_threads_share_one_client(client: ToolRunClient) -> None:
    answers: dict[int, Any] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                reply = client.tool_run(TEST, "CmdEcho", {"n": n, "i": i})
                answers[n * 100 + i] = reply.data["detail"]
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert answers == {n * 100 + i: {"n": n, "i": i} for n in range(16) for i in range(10)}


def test_a_store_restarted_behind_a_pooled_connection(store_factory: Callable[..., Store],
                                                      tmp_path: Path) -> None:
    first = store_factory()
    port = first.url.rsplit(":", 1)[1]
    with ToolRunClient(first.url, first.token) as c:
        assert c.tool_run(TEST, "CmdEcho", {"a": 1}).result is True
        first.stop()
        second = store_factory("--port", port)
        assert second.url == first.url
        # The idle connection the old store closed is not reused: the call goes through once.
        reply = c.tool_run(TEST, "CmdEcho", {"a": 2})
    assert reply.result is True
    assert [op["params"] for op in second.ops()][-1] == {"a": 2}


# The fault kinds of the reference store: each call fails the way a real network or store can.

def fault_client(store_factory: Callable[..., Store], *args: str, **kw: Any) -> tuple[Store, ToolRunClient]:
    st = store_factory("--token", SECRET, *args)
    assert st.token == SECRET
    return st, ToolRunClient(st.url, st.token, **kw)


def in_doubt(info: pytest.ExceptionInfo[StoreError]) -> str:
    """The error's text, once it is checked to be in doubt and free of the token."""
    err = info.value
    assert err.sent is True
    assert SECRET not in str(err)
    assert SECRET not in repr(err)
    assert err.__context__ is None
    return str(err)


def test_fault_reset_is_in_doubt(store_factory: Callable[..., Store]) -> None:
    st, c = fault_client(store_factory, "--fault", "reset:1")
    with c, pytest.raises(StoreError) as info:
        c.tool_run(TEST, "CmdEcho", {"a": 1})
    assert in_doubt(info) == f"the store at {shown(st.url)} {CLOSED}; {IN_DOUBT}"


def test_fault_truncate_is_in_doubt(store_factory: Callable[..., Store]) -> None:
    st, c = fault_client(store_factory, "--fault", "truncate:1")
    with c, pytest.raises(StoreError) as info:
        c.tool_run(TEST, "CmdEcho", {"a": 1})
    assert in_doubt(info) == f"the store at {shown(st.url)} cut its answer short; {IN_DOUBT}"


def test_fault_slow_with_a_short_read_timeout(store_factory: Callable[..., Store]) -> None:
    st, c = fault_client(store_factory, "--fault", "slow:1", "--slow-ms", "3000", read_timeout=0.5)
    with c, pytest.raises(StoreError) as info:
        c.tool_run(TEST, "CmdEcho", {"a": 1})
    assert in_doubt(info) == f"the store at {shown(st.url)} did not answer within 0.5 s; {IN_DOUBT}"


def test_fault_garbage_is_a_refusal_as_text(store_factory: Callable[..., Store]) -> None:
    _, c = fault_client(store_factory, "--fault", "garbage:1")
    with c:
        reply = c.tool_run(TEST, "CmdEcho", {"a": 1})
        assert reply.result is False
        assert list(reply.data) == ["result", "message"]
        assert reply.message == GARBAGE_TEXT


def test_fault_refuse_is_in_doubt(store_factory: Callable[..., Store]) -> None:
    st, c = fault_client(store_factory, "--fault", "refuse:1")
    with c, pytest.raises(StoreError) as info:
        c.tool_run(TEST, "CmdEcho", {"a": 1})
    # The store read the request and closed the connection: from the wire that is a reset, in doubt.
    assert in_doubt(info) == f"the store at {shown(st.url)} {CLOSED}; {IN_DOUBT}"
    assert st.ops() == []


def test_fault_huge_answer_over_the_cap(store_factory: Callable[..., Store]) -> None:
    st, c = fault_client(store_factory, "--fault", "huge:1", max_answer_bytes=8 * 1024 * 1024)
    with c, pytest.raises(StoreError) as info:
        c.tool_run(TEST, "CmdEcho", {"a": 1})
    assert in_doubt(info) == (
        f"the store at {shown(st.url)} sent an answer over 8 MB, more than this client takes in"
        f" (ask for fewer rows, or raise max_answer_bytes); {IN_DOUBT}"
    )


def test_fault_huge_answer_under_the_default_cap(store_factory: Callable[..., Store]) -> None:
    _, c = fault_client(store_factory, "--fault", "huge:1")
    with c:
        reply = c.tool_run(TEST, "CmdEcho", {"a": 1})
    assert reply.result is True
    assert reply.data["detail"] == {"a": 1}


class _Refused(Exception):
    """What a hook raises to keep a request from leaving."""


def test_a_hook_before_the_send_runs_once_connected_and_what_it_raises_sends_nothing() -> None:
    accepted, received = threading.Event(), bytearray()
    done = threading.Event()

    def listen(server: socket.socket) -> None:
        conn, _ = server.accept()
        accepted.set()
        with conn:
            while chunk := conn.recv(65536):
                received.extend(chunk)
        done.set()

    with socket.create_server(("127.0.0.1", 0)) as server:
        threading.Thread(target=listen, args=(server,), daemon=True).start()
        seen: list[tuple[bool, int]] = []

        def hook() -> None:
            # The connection is made and not a byte of the request is written yet.
            seen.append((accepted.wait(5), len(received)))
            raise _Refused

        with ToolRunClient(f"http://127.0.0.1:{server.getsockname()[1]}", "t") as client, \
                pytest.raises(_Refused):
            client.tool_run(TEST, "CmdEcho", {"a": 1}, before_send=hook)
        assert done.wait(5)
    assert seen == [(True, 0)]
    assert received == b""


def test_a_hook_that_raises_leaves_the_store_untouched_and_one_that_passes_lets_the_call_go(
        client: ToolRunClient, store: Store) -> None:
    calls: list[int] = []

    def refuse() -> None:
        raise _Refused

    count = len(store.ops())
    with pytest.raises(_Refused):
        client.tool_run(TEST, "CmdEcho", {"a": 1}, before_send=refuse)
    assert len(store.ops()) == count
    # The client goes on as before: the next call, on the same client, is sent.
    reply = client.tool_run(TEST, "CmdEcho", {"a": 2}, before_send=lambda: calls.append(1))
    assert reply.result is True
    assert calls == [1]
    assert [op["params"] for op in store.ops()[count:]] == [{"a": 2}]


def deadline_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "pooler-deadline"}


def test_a_closed_client_ends_its_deadline_thread_and_one_used_again_starts_another(store: Store) -> None:
    before = deadline_threads()
    client = ToolRunClient(store.url, store.token)
    assert client.tool_run(TEST, "CmdEcho", {"n": 1}).result is True
    (watchdog,) = deadline_threads() - before
    client.close()
    watchdog.join(timeout=30)
    assert not watchdog.is_alive()
    # A call after the close watches its deadline again, on a thread of its own.
    assert client.tool_run(TEST, "CmdEcho", {"n": 2}).result is True
    (again,) = deadline_threads() - before
    assert again is not watchdog
    client.close()
    again.join(timeout=30)
    assert not again.is_alive()
