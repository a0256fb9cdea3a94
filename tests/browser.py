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
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

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
