"""The files table's lock: held while a call's files are still arriving; a second call is refused."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from helpers import STORE_TOKEN, Store
from storekit import FILES, add_goods, data_of, files_on_disk, request_of, unique, upload, wait_for


def _slow_upload(store: Store, gid: int, first: bytes) -> tuple[socket.socket, bytes]:
    """Starts a multipart call whose file is still arriving: sends all but the file's end."""
    boundary = "slowboundary"
    request = json.dumps(
        {"unit": FILES, "command": "CmdAdd", "files": [{"part": "data_1", "entity": "store", "elem_id": gid}]}
    )
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n{request}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="data_1"; filename="slow.jpg"\r\n\r\n'
    ).encode()
    rest = b"-the end" + f"\r\n--{boundary}--\r\n".encode()
    body_len = len(head) + len(first) + len(rest)
    host, port = store.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(
        f"POST /tool_run HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {STORE_TOKEN}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {body_len}\r\n\r\n".encode()
        + head
        + first
    )
    return sock, rest


def test_the_files_table_is_in_work_while_another_call_writes(shared: Store) -> None:
    """The first call holds files_store while its file is still arriving; the second is refused at once."""
    gid = add_goods(shared)
    before = files_on_disk(shared)
    sock, rest = _slow_upload(shared, gid, b"first-half")
    try:
        # the file on disk is the sign that the first call holds the table's lock
        wait_for(lambda: len(files_on_disk(shared) - before) == 1)
        got = data_of(
            upload(
                shared,
                request_of([{"part": "data_1", "entity": "store", "elem_id": gid}]),
                {"data_1": ("second.jpg", b"second")},
            )
        )
        assert got["result"] is False
        assert (
            got["message"] == "The table files_store is in work right now, and nothing was written - call "
            "again in a moment."
        )
        assert len(files_on_disk(shared) - before) == 1
        sock.sendall(rest)
        answer = b""
        while not answer.endswith(b"}}"):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    finally:
        sock.close()
    doc = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert doc["data"]["result"] is True
    row = doc["data"]["files"][0]
    assert (shared.root / row["path"] / row["file_name"]).read_bytes() == b"first-half-the end"
    # with the lock free again, the second call goes through
    assert (
        data_of(
            upload(
                shared,
                request_of([{"part": "data_1", "entity": "store", "elem_id": gid}]),
                {"data_1": ("second.jpg", b"second")},
            )
        )["result"]
        is True
    )


def test_an_upload_cut_off_midway_leaves_nothing(shared: Store) -> None:
    gid = add_goods(shared)
    before = files_on_disk(shared)
    sock, _ = _slow_upload(shared, gid, b"partial")
    wait_for(lambda: len(files_on_disk(shared) - before) == 1)
    sock.close()
    wait_for(lambda: files_on_disk(shared) == before)
    # and the table is free for the next call
    got = data_of(
        upload(
            shared,
            request_of([{"part": "data_1", "entity": "store", "elem_id": gid}]),
            {"data_1": ("next.jpg", b"n")},
        )
    )
    assert got["result"] is True


def test_two_uploads_at_once_never_share_a_file(shared: Store) -> None:
    gid = add_goods(shared)
    barrier = threading.Barrier(4)
    results: list[dict[str, Any]] = []

    def go(n: int) -> None:
        barrier.wait()
        results.append(
            data_of(
                upload(
                    shared,
                    request_of([{"part": "data_1", "entity": "store", "elem_id": gid}]),
                    {"data_1": (f"{n}.jpg", unique("b").encode())},
                )
            )
        )

    threads = [threading.Thread(target=go, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    taken = [r for r in results if r["result"]]
    refused = [r for r in results if not r["result"]]
    assert len(taken) >= 1
    assert all(r["message"].startswith("The table files_store is in work right now") for r in refused)
    names = [r["files"][0]["file_name"] for r in taken]
    assert len(set(names)) == len(names)
