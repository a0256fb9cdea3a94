"""A language client of the tests' own: ``pooler lsp`` spoken to in JSON-RPC with LSP's
Content-Length framing, every message it sends kept in order. The server is the command's own
(``lsp_cmd.prepare``), served in the test's process over two pipes, as the command serves stdio;
with ``process=True`` it is started as an editor starts it, for what belongs to the process (a
process costs a second of CPU importing pygls and pooler)."""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from helpers import ROOT, environment

#: Seconds a test waits for an answer or a notification: generous, a busy machine is slow.
WAIT = 60.0


def uri_of(path: Path) -> str:
    return path.resolve().as_uri()


class Client:
    """``pooler lsp`` in a thread of the test's process (or a child process), and what it said."""

    def __init__(self, *args: str, init: dict[str, Any] | None = None, env: dict[str, str] | None = None,
                 process: bool = False) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.served: threading.Thread | None = None
        self._said = io.StringIO()
        if process:
            pipe = subprocess.PIPE
            self.proc = subprocess.Popen([sys.executable, "-m", "pooler", "lsp", *args], cwd=ROOT,
                                         stdin=pipe, stdout=pipe, stderr=pipe, env=environment(env))
            assert self.proc.stdin is not None
            assert self.proc.stdout is not None
            self.to_server, from_server = self.proc.stdin, self.proc.stdout
        else:
            from pooler.cli.commands.lsp_cmd import prepare  # noqa: PLC0415

            server = prepare(list(args), stderr=self._said, environ=environment(env))
            (server_in, to_server), (from_server_fd, server_out) = os.pipe(), os.pipe()
            self.to_server, from_server = os.fdopen(to_server, "wb"), os.fdopen(from_server_fd, "rb")
            ends = (os.fdopen(server_in, "rb"), os.fdopen(server_out, "wb"))
            self.served = threading.Thread(target=self._serve, args=(server, *ends), daemon=True)
            self.served.start()
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.answers: dict[int, dict[str, Any]] = {}
        self.notes: list[dict[str, Any]] = []
        self.lock = threading.Condition()
        self.next_id = 0
        self.versions: dict[str, int] = {}
        self.reader = threading.Thread(target=self._read, args=(from_server,), daemon=True)
        self.reader.start()
        self.initialized = self.request("initialize", {
            "processId": None, "rootUri": ROOT.resolve().as_uri(),
            "capabilities": {"textDocument": {"publishDiagnostics": {"relatedInformation": True}}},
            "initializationOptions": init or {}})
        self.notify("initialized", {})

    @staticmethod
    def _serve(server: Any, server_in: IO[bytes], server_out: IO[bytes]) -> None:
        """The command's server on the pipes, until the client says exit or closes its end."""
        try:
            server.start_io(server_in, server_out)
        finally:
            server_in.close()
            if not server_out.closed:
                server_out.close()

    def _read(self, stream: IO[bytes]) -> None:
        while True:
            length = 0
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value.strip())
            message = json.loads(stream.read(length))
            with self.lock:
                if "id" in message and "method" not in message:
                    self.answers[message["id"]] = message
                elif "method" in message and "id" in message:
                    self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                else:
                    self.notes.append(message)
                self.lock.notify_all()

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode("utf-8")
        self.to_server.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.to_server.flush()

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        with self.lock:
            self.next_id += 1
            number = self.next_id
        self._send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        with self.lock:
            if not self.lock.wait_for(lambda: number in self.answers, timeout=WAIT):
                raise AssertionError(f"no answer to {method} in {WAIT:g} s; stderr: {self.stderr()}")
            answer = self.answers.pop(number)
        assert "error" not in answer, answer
        return answer.get("result")

    def open(self, path: Path, text: str | None = None) -> str:
        uri = uri_of(path)
        self.versions[uri] = 1
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "json" if path.suffix == ".json" else "yaml", "version": 1,
            "text": path.read_text(encoding="utf-8") if text is None else text}})
        return uri

    def change(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": self.versions[uri]},
                                                "contentChanges": [{"text": text}]})

    def diagnostics(self, uri: str, *, after: int = 0) -> list[dict[str, Any]]:
        """The diagnostics of ``uri`` in the first publication after the ``after``-th message."""
        def published() -> dict[str, Any] | None:
            return next((n for n in self.notes[after:] if n["method"] == "textDocument/publishDiagnostics"
                         and n["params"]["uri"] == uri), None)
        with self.lock:
            if not self.lock.wait_for(lambda: published() is not None, timeout=WAIT):
                raise AssertionError(f"no diagnostics of {uri} in {WAIT:g} s; stderr: {self.stderr()}")
            found = published()
        assert found is not None
        return list(found["params"]["diagnostics"])

    def mark(self) -> int:
        """How many notifications came so far (to wait for the next publication)."""
        with self.lock:
            return len(self.notes)

    def at(self, uri: str, line: int, character: int) -> dict[str, Any]:
        return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}

    def alive(self) -> bool:
        """Whether the server is still serving."""
        if self.proc is not None:
            return self.proc.poll() is None
        assert self.served is not None
        return self.served.is_alive()

    def stderr(self) -> str:
        """What the server said for people: its stderr, once the process has ended."""
        if self.proc is None:
            return self._said.getvalue()
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode()

    def close(self) -> int:
        """shutdown, then exit: the server's exit status (in the test's process, 0 once its
        thread has ended, as the command then returns)."""
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            if self.proc is not None:
                return self.proc.wait(timeout=WAIT)
            assert self.served is not None
            self.to_server.close()
            self.served.join(timeout=WAIT)
            if self.served.is_alive():
                raise AssertionError(f"the server did not end within {WAIT:g} s of exit")
            return 0
        finally:
            if self.proc is not None:
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait()
                for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                    if stream is not None:
                        stream.close()
            elif not self.to_server.closed:
                self.to_server.close()
