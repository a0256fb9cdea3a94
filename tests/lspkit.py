"""A language client of the tests' own: ``pooler lsp`` started as an editor starts it, spoken to
over stdio in JSON-RPC with LSP's Content-Length framing, every message it sends kept in order."""

from __future__ import annotations

import json
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
    """``pooler lsp`` as a child process, and what it said."""

    def __init__(self, *args: str, cwd: Path = ROOT, init: dict[str, Any] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "pooler", "lsp", *args], cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=environment(env))
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.answers: dict[int, dict[str, Any]] = {}
        self.notes: list[dict[str, Any]] = []
        self.lock = threading.Condition()
        self.next_id = 0
        self.versions: dict[str, int] = {}
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()
        self.initialized = self.request("initialize", {
            "processId": None, "rootUri": cwd.resolve().as_uri(),
            "capabilities": {"textDocument": {"publishDiagnostics": {"relatedInformation": True}}},
            "initializationOptions": init or {}})
        self.notify("initialized", {})

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
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

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

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode()

    def close(self) -> int:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            return self.proc.wait(timeout=WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()

