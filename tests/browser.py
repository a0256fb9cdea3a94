"""Headless Chromium for the report tests: the rendered page, a screenshot, and every request the
page itself made (from Chromium's net log).

Where Chromium is missing the tests skip with the reason; with ``POOLER_REQUIRE_CHROMIUM=1`` (CI)
they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         # Chromium's own background requests never leave the machine either.
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


def chromium_path() -> str:
    """The browser, or skip (fail under POOLER_REQUIRE_CHROMIUM=1) saying why."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is not None:
        return found
    why = "Chromium is not installed (apt-get install chromium): the HTML report's browser tests did not run"
    if os.environ.get("POOLER_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"POOLER_REQUIRE_CHROMIUM=1: {why}")
    pytest.skip(why)


@dataclass
class Page:
    dom: str
    #: URLs the page asked for (Chromium's own requests left out).
    requests: list[str]


class Browser:
    def __init__(self, folder: Path) -> None:
        self.exe = chromium_path()
        self.folder = folder
        self.runs = 0

    def _run(self, url: str, *extra: str) -> tuple[str, list[str]]:
        self.runs += 1
        profile = self.folder / f"profile-{self.runs}"
        netlog = self.folder / f"net-{self.runs}.json"
        proc = subprocess.run(
            [self.exe, *FLAGS, f"--user-data-dir={profile}", f"--log-net-log={netlog}", *extra, url],
            capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout, page_requests(netlog)

    def open(self, path: Path) -> Page:
        dom, requests = self._run(path.absolute().as_uri(), "--dump-dom")
        return Page(dom, requests)

    def screenshot(self, path: Path, out: Path, size: str = "1400,1000") -> list[str]:
        _, requests = self._run(path.absolute().as_uri(), f"--screenshot={out}", f"--window-size={size}")
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        return requests


    def evaluate(self, path: Path, expression: str) -> Any:
        """The value of ``expression`` evaluated in the loaded page (DevTools over a pipe)."""
        self.runs += 1
        reads, to_browser = os.pipe()
        from_browser, writes = os.pipe()

        def fds() -> None:  # the pipe protocol: Chromium reads fd 3 and writes fd 4
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        profile = self.folder / f"profile-{self.runs}"
        # preexec_fn only dup2()s, which is safe after fork even with threads about.
        proc = subprocess.Popen([self.exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                                 "about:blank"], pass_fds=(3, 4), preexec_fn=fds,  # noqa: PLW1509
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(reads)
        os.close(writes)
        try:
            with os.fdopen(to_browser, "wb") as out, os.fdopen(from_browser, "rb") as back:
                devtools = DevTools(out, back)
                targets = devtools.call("Target.getTargets")["targetInfos"]
                page = next(t for t in targets if t["type"] == "page")
                session = devtools.call("Target.attachToTarget", targetId=page["targetId"],
                                        flatten=True)["sessionId"]
                devtools.call("Page.enable", session)
                devtools.call("Page.navigate", session, url=path.absolute().as_uri())
                devtools.wait_for("Page.loadEventFired")
                value = devtools.evaluate(session, expression)
                devtools.call("Browser.close")
        finally:
            proc.wait(timeout=60)
        return value


class DevTools:
    """Chromium's DevTools protocol over ``--remote-debugging-pipe``: JSON messages ended by NUL."""

    def __init__(self, out: Any, back: Any) -> None:
        self.out = out
        self.back = back
        self.buffer = b""
        self.last = 0
        self.events: list[str] = []

    def call(self, method: str, session: str | None = None, **params: Any) -> Any:
        self.last += 1
        message: dict[str, Any] = {"id": self.last, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self.out.write(json.dumps(message).encode() + b"\0")
        self.out.flush()
        while True:
            answer = self._next()
            if answer.get("id") == self.last:
                assert "error" not in answer, answer
                return answer.get("result")

    def wait_for(self, event: str) -> None:
        """Until Chromium tells ``event`` (kept if it came while waiting for an answer)."""
        while event not in self.events:
            self._next()

    def _next(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            chunk = os.read(self.back.fileno(), 1 << 16)
            assert chunk, "Chromium closed the DevTools pipe"
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        if "method" in message:
            self.events.append(message["method"])
        return message

    def evaluate(self, session: str, expression: str) -> Any:
        found = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in found, found
        return found["result"].get("value")


def page_requests(netlog: Path) -> list[str]:
    """URLs of the requests a page started: Chromium's own carry no origin as their initiator."""
    log = json.loads(netlog.read_text(encoding="utf-8"))
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    found = []
    for event in log["events"]:
        params = event.get("params") or {}
        # The job's start carries the URL and initiator; its end carries neither.
        if event["type"] == start and "url" in params and params.get("initiator") != "not an origin":
            found.append(str(params["url"]))
    return found


class Elements(HTMLParser):
    """Every element of a rendered page as (tag, attributes), and its text."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        #: The text of every <title> in the page's body: the hover texts of the timeline.
        self.titles: list[str] = []
        self._in_title = False
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        if tag == "title" and any(t == "svg" for t, _ in self.elements):
            self._in_title = True
            self.titles.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_title:
            self.titles[-1] += data

    def having(self, tag: str, cls: str = "", **attrs: Any) -> list[dict[str, str]]:
        out = []
        for name, found in self.elements:
            if name != tag or (cls and cls not in found.get("class", "").split()):
                continue
            if all(found.get(k.replace("_", "-")) == str(v) for k, v in attrs.items()):
                out.append(found)
        return out

    def all_text(self) -> str:
        return "".join(self.text)
