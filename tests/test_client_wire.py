"""What the client puts on the wire and takes off it, seen by a stand-in store on 127.0.0.1: the
same request a store has always had from pooler, one connection kept alive, a redirect taken as the
answer it is, a compressed answer decoded, and no credential but the token."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import serve

from pooler.client.http import Attachment, ToolRunClient
from pooler.errors import StoreError
from pooler.version import __version__

TEST = "MELBIS_AGENT_TEST"
IN_DOUBT = "the call may or may not have been carried out"
GOOD = b'{"ok": true, "data": {"result": true, "message": "", "detail": {"n": 1}}}'


class Recorder(BaseHTTPRequestHandler):
    """Keeps every request (its client's port, path, headers in order and body) and answers from
    ``answers`` (status, headers, body, bytes actually written), then with GOOD."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[int, str, list[tuple[str, str]], bytes]]]
    answers: ClassVar[list[tuple[int, dict[str, str], bytes, int | None]]]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class names it
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append((self.client_address[1], self.path, list(self.headers.items()), body))
        status, headers, answer, written = (type(self).answers.pop(0) if type(self).answers
                                            else (200, {}, GOOD, None))
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer[:written])
        if written is not None:
            self.close_connection = True


@pytest.fixture
def recorder() -> Iterator[tuple[str, type[Recorder]]]:
    handler = type("Handler", (Recorder,), {"seen": [], "answers": []})
    with serve(handler) as url:
        yield url, handler


def names_and_values(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, "ENCODINGS" if name == "Accept-Encoding" else value) for name, value in headers]


def test_a_call_carries_the_headers_pooler_has_always_sent_and_no_credential_from_the_url(
        recorder: tuple[str, type[Recorder]], tmp_path: Path) -> None:
    url, handler = recorder
    host = url.removeprefix("http://")
    photo = tmp_path / "front.jpg"
    photo.write_bytes(b"\xff\xd8" + bytes(range(256)) * 40)
    with ToolRunClient(f"http://shop:pa55word@{host}/shop base/", "T0ken") as client:
        client.call_headers = lambda: {"traceparent": "00-abc-def-01"}
        client.tool_run(TEST, "CmdEcho", {"n": 1}, idempotency_key="task 7:row-1", headers={"X-Fence": "3"})
        client.tool_run("MELBIS_AGENT_IMPORT_FILES", "CmdAdd", files=[Attachment(photo, {"elem_id": 1})])
        client.tool_list()
    first, upload, listing = handler.seen
    assert [first[1], upload[1], listing[1]] == ["/shop%20base/tool_run"] * 2 + ["/shop%20base/tool_list"]
    common = [("Host", host), ("User-Agent", f"pooler/{__version__}"), ("Accept-Encoding", "ENCODINGS"),
              ("Accept", "application/json"), ("Connection", "keep-alive"), ("Authorization", "Bearer T0ken")]
    assert names_and_values(first[2]) == [*common, ("Content-Length", str(len(first[3]))), ("X-Fence", "3"),
                                          ("Idempotency-Key", "task%207:row-1"),
                                          ("Content-Type", "application/json"),
                                          ("traceparent", "00-abc-def-01")]
    assert first[3] == (b'{"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": {"n": 1},'
                        b' "debug": false}')
    # The upload is streamed from disk with its length stated: never chunked.
    boundary = dict(upload[2])["Content-Type"].removeprefix("multipart/form-data; boundary=")
    assert names_and_values(upload[2]) == [*common, ("Content-Length", str(len(upload[3]))),
                                           ("Content-Type", f"multipart/form-data; boundary={boundary}"),
                                           ("traceparent", "00-abc-def-01")]
    assert upload[3].endswith(photo.read_bytes() + f"\r\n--{boundary}--\r\n".encode())
    assert listing[3] == b"{}"
    # What the client says it decodes: gzip and deflate at least, as requests said.
    assert dict(first[2])["Accept-Encoding"].split(", ")[:2] == ["gzip", "deflate"]
    sent = [value for _, _, headers, _ in handler.seen for _, value in headers]
    assert all("pa55word" not in value and "shop:" not in value for value in sent)


def test_the_netrc_file_is_never_read(recorder: tuple[str, type[Recorder]], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    url, handler = recorder
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login shop password pa55word\n", encoding="utf-8")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(netrc))
    with ToolRunClient(url) as client:
        client.tool_run(TEST, "CmdEcho", {"n": 1})
    assert "Authorization" not in dict(handler.seen[0][2])


def test_calls_in_a_row_go_over_one_kept_alive_connection(recorder: tuple[str, type[Recorder]]) -> None:
    url, handler = recorder
    with ToolRunClient(url, "t") as client:
        replies = [client.tool_run(TEST, "CmdEcho", {"n": n}) for n in range(5)]
    assert [r.result for r in replies] == [True] * 5
    assert len({port for port, _, _, _ in handler.seen}) == 1
    assert len(handler.seen) == 5


def test_a_redirect_is_the_stores_answer_and_is_not_followed(recorder: tuple[str, type[Recorder]]) -> None:
    url, handler = recorder
    handler.answers.append((307, {"Location": f"{url}/elsewhere", "Content-Type": "text/html"},
                            b"<html>moved</html>", None))
    with ToolRunClient(url, "t") as client:
        reply = client.tool_run(TEST, "CmdEcho", {"n": 1})
    assert (reply.status, reply.result) == (307, False)
    assert [path for _, path, _, _ in handler.seen] == ["/tool_run"]


COMPRESS: dict[str, Callable[[bytes], bytes]] = {"gzip": gzip.compress, "deflate": zlib.compress}


@pytest.mark.parametrize("encoding", sorted(COMPRESS))
def test_a_compressed_answer_is_decoded(encoding: str, recorder: tuple[str, type[Recorder]]) -> None:
    url, handler = recorder
    handler.answers.append((200, {"Content-Encoding": encoding}, COMPRESS[encoding](GOOD), None))
    with ToolRunClient(url, "t") as client:
        reply = client.tool_run(TEST, "CmdEcho", {"n": 1})
        assert (reply.result, reply.data["detail"]) == (True, {"n": 1})
        # The connection the answer came on is whole and is used again.
        assert client.tool_run(TEST, "CmdEcho", {"n": 1}).result is True
    assert len({port for port, _, _, _ in handler.seen}) == 1


@pytest.mark.parametrize("encoding", ["gzip", "identity"])
def test_an_answer_cut_short_is_in_doubt(encoding: str, recorder: tuple[str, type[Recorder]]) -> None:
    url, handler = recorder
    body = COMPRESS[encoding](GOOD * 50) if encoding in COMPRESS else GOOD * 50
    handler.answers.append((200, {"Content-Encoding": encoding}, body, len(body) // 2))
    with ToolRunClient(url, "t") as client, pytest.raises(StoreError) as caught:
        client.tool_run(TEST, "CmdEcho", {"n": 1})
    assert caught.value.message == f"the store at {url}/ cut its answer short; {IN_DOUBT}"
    assert caught.value.sent is True
