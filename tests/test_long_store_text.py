"""A store's long text is masked, then cut to 2,000 characters, in every place it goes."""

from __future__ import annotations

import json
import sqlite3
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from helpers import answer_of, pooler, serve

TOKEN = "long-text-token-0f9e8d7c6b5a"
#: 148,075 characters, as a store's stack trace in ``data.message`` came, with the token in it
#: across the 2,000th character.
LONG = "x" * 1990 + TOKEN + "y" * (148_075 - 1990 - len(TOKEN))


class LongMessage(BaseHTTPRequestHandler):
    """Answers every call ``ok`` with a ``data.message`` of 148,075 characters."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"ok": True, "ms": 1, "data": {"result": False, "message": LONG}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_long_message_is_cut_in_the_answer_the_journal_the_log_and_the_report(tmp_path: Path) -> None:
    pool = tmp_path / "three.json"
    steps = [{"name": f"s{n}", "unit": "MELBIS_AGENT_TEST", "command": "CmdFail"} for n in range(3)]
    pool.write_text(json.dumps({"stop_on_error": False, "pool": steps}), encoding="utf-8")
    token = tmp_path / "token"
    token.write_text(TOKEN, encoding="utf-8")
    token.chmod(0o600)
    journal, report, log = tmp_path / "journal.sqlite", tmp_path / "report.html", tmp_path / "run.log"
    with serve(LongMessage) as url:
        proc = pooler("run", str(pool), "--store", url, "--token-file", str(token), "--out",
                      str(tmp_path / "out"), "--journal", str(journal), "--report", str(report),
                      "--log", str(log), "--json")
    assert proc.returncode == 1, proc.stderr
    # Masked first (the token is ***), then cut to 2,000 characters.
    cut = "x" * 1990 + "***" + "y" * 7
    messages = [step["message"] for step in answer_of(proc)["steps"]]
    assert messages == [cut] * 3
    with sqlite3.connect(journal) as db:
        rows = [list(row) for row in db.execute("SELECT * FROM calls")]
    assert len(rows) >= 3
    whole = json.dumps(rows, default=str)
    html = report.read_text(encoding="utf-8")
    for text in (proc.stdout, proc.stderr, whole, html, log.read_text(encoding="utf-8")):
        assert "x" * 1991 not in text
        assert "y" * 8 not in text
        assert TOKEN[:6] not in text
    assert cut in html
    # Three calls' report: a page of its own size, not three copies of a 148 KB text.
    assert len(html.encode()) < 250_000
