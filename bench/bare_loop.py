"""The floor of the per-call overhead case: the same echo calls as a bare loop on one Session.

``python bench/bare_loop.py URL TOKEN_FILE CALLS``: each call sends the previous answer's
``detail.n`` as ``prev``, the way the pool's references do, and checks ``result``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import requests


def main(argv: list[str]) -> int:
    url, token_file, calls = argv[0], argv[1], int(argv[2])
    token = Path(token_file).read_text(encoding="utf-8").strip()
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    prev: Any = None
    for i in range(1, calls + 1):
        params: dict[str, Any] = {"n": i, "sku": f"SKU-{i:06d}"}
        if i > 1:
            params["prev"] = prev
        body = {"unit": "MELBIS_AGENT_TEST", "command": "CmdEcho", "params": params, "debug": False}
        answer = session.post(f"{url}/tool_run", json=body, timeout=(5, 60)).json()
        data = answer["data"]
        if not data.get("result"):
            print(f"call {i} refused: {data.get('message')}", file=sys.stderr)
            return 1
        prev = data["detail"]["n"]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
