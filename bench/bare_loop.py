"""The floor of the call cases: the same echo calls as a bare loop on one requests.Session.

``python bench/bare_loop.py URL TOKEN_FILE CALLS``: each call sends the previous answer's
``detail.n`` as ``prev``, the way the chained pool's references do, and checks ``result``.

``python bench/bare_loop.py URL TOKEN_FILE CALLS WIDTH``: the calls unchained, ``WIDTH`` at a time
on a thread pool, as the parallel pool sends them. Prints ``{"trip_ms": N}``: the calls' own time
(connections opened on the way, as pooler's are), start-up left out.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

UNIT = "MELBIS_AGENT_TEST"


def session(token_file: str, width: int) -> requests.Session:
    token = Path(token_file).read_text(encoding="utf-8").strip()
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {token}"
    s.mount("http://", HTTPAdapter(pool_connections=1, pool_maxsize=width))
    return s


def call(s: requests.Session, url: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"unit": UNIT, "command": "CmdEcho", "params": params, "debug": False}
    data: dict[str, Any] = s.post(f"{url}/tool_run", json=body, timeout=(5, 60)).json()["data"]
    if not data.get("result"):
        raise RuntimeError(f"call refused: {data.get('message')}")
    return data


def chained(url: str, token_file: str, calls: int) -> None:
    s = session(token_file, 1)
    prev: Any = None
    for i in range(1, calls + 1):
        params: dict[str, Any] = {"n": i, "sku": f"SKU-{i:06d}"}
        if i > 1:
            params["prev"] = prev
        prev = call(s, url, params)["detail"]["n"]


def parallel(url: str, token_file: str, calls: int, width: int) -> float:
    s = session(token_file, width)
    with ThreadPoolExecutor(width) as pool:
        started = time.perf_counter()
        list(pool.map(lambda i: call(s, url, {"n": i, "sku": f"SKU-{i:06d}"}), range(1, calls + 1)))
        return (time.perf_counter() - started) * 1000


def main(argv: list[str]) -> int:
    url, token_file, calls = argv[0], argv[1], int(argv[2])
    try:
        if len(argv) > 3:
            print(json.dumps({"trip_ms": round(parallel(url, token_file, calls, int(argv[3])))}))
        else:
            chained(url, token_file, calls)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
