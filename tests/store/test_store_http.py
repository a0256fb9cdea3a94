"""The HTTP layer: bad requests are refused and the store keeps serving; keep-alive; latency;
restart; signals."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import STORE_TOKEN, Store, start_store
from storekit import TEST, add_goods, data, unique, upload, wait_for

from pooler.store.cli import main as store_main

HEADERS = {"Authorization": f"Bearer {STORE_TOKEN}"}


def _alive(store: Store) -> None:
    assert data(store, TEST, "CmdEcho", {"alive": True})["detail"] == {"alive": True}


def _raw(store: Store, payload: bytes) -> bytes:
    """Sends bytes on a fresh connection; what comes back until the store closes it."""
    host, port = store.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(payload)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def _post_raw(store: Store, body: bytes, content_type: str = "application/json") -> requests.Response:
    return requests.post(
        f"{store.url}/tool_run", data=body, timeout=10, headers={**HEADERS, "Content-Type": content_type}
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            b"{not json",
            ("The body is not JSON: Expecting property name enclosed in double quotes at line 1 column 2 - "
            "send one JSON object."),
        ),
        (b"\xff\xfe{}", "The body is not UTF-8 text (byte 0) - send JSON in UTF-8."),
        (
            b"[1, 2]",
            'The body is a list, not a JSON object - send {"unit": ..., "command": ..., "params": {...}}.',
        ),
        (
            b'"text"',
            'The body is a string, not a JSON object - send {"unit": ..., "command": ..., "params": {...}}.',
        ),
        (b'{"unit": NaN}', "The body is not JSON: NaN is not a JSON value - send one JSON object."),
        (
            b"[" * 100000 + b"]" * 100000,
            ("The body is not JSON: maximum recursion depth exceeded while decoding a JSON "
            "array from a unicode string - send one JSON object."),
        ),
        (b"", "The body is not JSON: Expecting value at line 1 column 1 - send one JSON object."),
    ],
)
def test_a_body_that_is_not_a_json_object(shared: Store, body: bytes, error: str) -> None:
    resp = _post_raw(shared, body)
    assert resp.status_code == 400
    assert resp.json() == {"ok": False, "error": error}
    _alive(shared)


def test_get_and_other_methods(shared: Store) -> None:
    resp = requests.get(f"{shared.url}/tool_run", timeout=10)
    assert resp.status_code == 405
    assert resp.headers["Allow"] == "POST"
    assert resp.json() == {"ok": False, "error": "GET is not served - POST JSON to /tool_run or /tool_list."}
    assert requests.put(f"{shared.url}/tool_run", timeout=10).status_code == 405
    resp = requests.request("BREW", f"{shared.url}/tool_run", timeout=10)
    assert resp.status_code == 501
    assert resp.text == "501 Unsupported method ('BREW') - the store answers POST /tool_run and /tool_list."
    _alive(shared)


def test_an_unknown_path(shared: Store) -> None:
    resp = requests.post(f"{shared.url}/tool_runs", json={}, headers=HEADERS, timeout=10)
    assert resp.status_code == 404
    assert (
        resp.json()["error"]
        == "No such endpoint: /tool_runs - the store answers POST /tool_run and /tool_list."
    )
    _alive(shared)


def test_a_body_over_the_limit_is_refused_unread(shared: Store) -> None:
    out = _raw(
        shared,
        b"POST /tool_run HTTP/1.1\r\nHost: x\r\nContent-Length: 70000000\r\n"
        b"Authorization: Bearer test-store-token-4f1c9a\r\n\r\n{",
    )
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ")
    assert b"Connection: close" in head
    assert json.loads(body) == {
        "ok": False,
        "error": "The body is larger than 64 MB - send fewer rows or files per call.",
    }
    _alive(shared)


def test_a_chunked_body_and_a_bad_length(shared: Store) -> None:
    out = _raw(shared, b"POST /tool_run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 411 ")
    assert out.endswith(b'"Send the body with a Content-Length, not in chunks."}')
    out = _raw(shared, b"POST /tool_run HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 ")
    _alive(shared)


def test_a_request_line_that_is_not_http(shared: Store) -> None:
    out = _raw(shared, b"HELLO THERE\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 400 ")
    assert b"Traceback" not in out
    _alive(shared)


def test_a_client_that_leaves_inside_the_body(shared: Store) -> None:
    host, port = shared.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b'POST /tool_run HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"unit"')
    _alive(shared)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            b'--b\r\nContent-Disposition: form-data; name="data_1"; filename="a"\r\n\r\nxyz\r\n--b--\r\n',
            "The multipart body has no part named request - put the call's JSON in it.",
        ),
        (
            b'--b\r\nContent-Disposition: form-data; name="request"\r\n\r\n[1]\r\n--b--\r\n',
            'The body is a list, not a JSON object - send {"unit": ..., "command": ..., "params": {...}}.',
        ),
    ],
)
def test_a_multipart_body_that_is_not_a_call(shared: Store, body: bytes, error: str) -> None:
    resp = _post_raw(shared, body, "multipart/form-data; boundary=b")
    assert resp.status_code == 400
    assert resp.json()["error"] == error
    _alive(shared)


def test_a_broken_multipart_body_is_closed_without_a_traceback(shared: Store) -> None:
    body = b"--b\r\nno disposition here\r\n\r\nxyz\r\n--b--\r\n"
    out = _raw(
        shared,
        b"POST /tool_run HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
        b"Content-Length: %d\r\nAuthorization: Bearer test-store-token-4f1c9a\r\n\r\n" % len(body) + body,
    )
    assert b"Traceback" not in out
    _alive(shared)


def test_keep_alive_calls_share_one_connection_and_are_quick(shared: Store) -> None:
    host, port = shared.url.removeprefix("http://").split(":")
    body = json.dumps({"unit": TEST, "command": "CmdEcho", "params": {"n": 1}}).encode()
    request = (
        b"POST /tool_run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-store-token-4f1c9a\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        reader = sock.makefile("rb")
        for _ in range(3):
            sock.sendall(request)
            status = reader.readline()
            assert status == b"HTTP/1.1 200 OK\r\n"
            length = 0
            while (line := reader.readline()) != b"\r\n":
                assert not line.lower().startswith(b"connection: close")
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert json.loads(reader.read(length))["data"]["detail"] == {"n": 1}
    # one write per answer: without it a keep-alive call stalls ~40 ms on delayed ACKs
    with requests.Session() as session:
        session.headers.update(HEADERS)
        url = f"{shared.url}/tool_run"
        session.post(url, data=body, timeout=10)
        took = []
        for _ in range(100):
            started = time.perf_counter()
            assert session.post(url, data=body, timeout=10).status_code == 200
            took.append(time.perf_counter() - started)
    # A stall on a delayed ACK holds every call; a busy machine holds some of them: the quickest
    # tenth of the calls tells the one from the other.
    per_call = sorted(took)[9]
    assert per_call < 0.025, f"{per_call * 1000:.1f} ms per keep-alive call"


def test_latency_is_added_to_every_call(store_factory: Any) -> None:
    store = store_factory("--latency-ms", "150")
    started = time.perf_counter()
    doc = store.call(TEST, "CmdEcho").json()
    assert time.perf_counter() - started >= 0.15
    assert doc["ms"] >= 150
    assert doc["unit_ms"] < 150
    refused = store.call(TEST, "CmdNope").json()
    assert refused["ms"] >= 150


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_reply_delay_answers_a_call_only_after_it_is_carried_out_and_recorded(
        store_factory: Any, keyed: bool) -> None:
    store = store_factory("--reply-delay-ms", "3000")
    headers = {**HEADERS, **({"Idempotency-Key": unique("late")} if keyed else {})}
    body = {"unit": TEST, "command": "CmdEcho", "params": {"n": 7}}
    answered: list[Any] = []
    caller = threading.Thread(target=lambda: answered.append(
        requests.post(f"{store.url}/tool_run", json=body, headers=headers, timeout=30)))
    caller.start()
    # Carried out and in the ops (CmdOps itself carries nothing out, and is answered at once) while
    # its answer is still held back.
    wait_for(lambda: any(op["params"] == {"n": 7} for op in store.ops()))
    assert caller.is_alive()
    assert answered == []
    caller.join()
    assert answered[0].json()["data"]["detail"] == {"n": 7}


@pytest.mark.process
def test_state_and_keys_survive_a_restart_and_signals_stop_cleanly(tmp_path: Path) -> None:
    store = start_store(tmp_path, process=True)
    key = unique("durable")
    session = requests.Session()
    try:
        sku = unique("sku")
        data(store, "MELBIS_AGENT_STORE", "CmdAdd", {"sku": sku, "name": "Kept"})
        gid = add_goods(store)
        got = upload(
            store,
            {
                "unit": "MELBIS_AGENT_IMPORT_FILES",
                "command": "CmdAdd",
                "files": [{"part": "data_1", "entity": "store", "elem_id": gid}],
            },
            {"data_1": ("kept.jpg", b"kept")},
        ).json()["data"]
        keyed = session.post(
            f"{store.url}/tool_run",
            json={"unit": TEST, "command": "CmdEcho", "params": {"n": 1}},
            headers={**HEADERS, "Idempotency-Key": key},
            timeout=10,
        )
        ops = store.ops()
        # SIGTERM with a keep-alive connection still open
        store.proc.send_signal(signal.SIGTERM)
        out, err = store.proc.communicate(timeout=10)
    finally:
        store.stop()
        session.close()
    assert (store.proc.returncode, out, err) == (0, "", "")
    again = start_store(tmp_path, process=True)
    try:
        assert data(again, "MELBIS_AGENT_STORE", "CmdGet", {"sku": sku})["detail"]["row"]["name"] == "Kept"
        row = got["files"][0]
        assert (again.root / row["path"] / row["file_name"]).read_bytes() == b"kept"
        assert again.ops()[: len(ops)] == ops
        assert add_goods(again) > gid  # ids go on where they stopped
        repeat = requests.post(
            f"{again.url}/tool_run",
            json={"unit": TEST, "command": "CmdEcho", "params": {"n": 1}},
            headers={**HEADERS, "Idempotency-Key": key},
            timeout=10,
        )
        assert repeat.content == keyed.content
        assert sum(o["idempotency_key"] == key for o in again.ops()) == 1
        again.proc.send_signal(signal.SIGINT)
        out, err = again.proc.communicate(timeout=10)
    finally:
        again.stop()
    assert (again.proc.returncode, out, err) == (0, "", "")


def test_bad_start_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nowhere = tmp_path / "nowhere"
    assert (
        store_main(
            [
                "serve",
                "--db",
                str(tmp_path / "db"),
                "--root",
                str(tmp_path / "root"),
                "--registry",
                str(nowhere),
            ]
        )
        == 2
    )
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err.strip() == f"pooler store: {nowhere}: --registry {nowhere} is not a folder - pass a folder of "
        "*.json declarations"
    )


def test_a_bad_declaration_is_refused_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "reg"
    folder.mkdir()
    (folder / "bad.json").write_text(
        '{"module": "bad.php", "commands": [{"name": "CmdX", "params": [{"name": "n", "type": "number"}]}]}',
        encoding="utf-8",
    )
    assert (
        store_main(
            [
                "serve",
                "--db",
                str(tmp_path / "db"),
                "--root",
                str(tmp_path / "root"),
                "--registry",
                str(folder),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err == (
        f"pooler store: {folder / 'bad.json'}: commands[0].params[0].type must be one of bool, datetime, "
        "datetime/json, files, float, float/json, int, int/json, json, jsonl, str, str/json"
    )
