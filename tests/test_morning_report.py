"""The report for the morning after cron: the failed calls at the top, and commands that run as written."""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

from helpers import Store, pooler

POOL = """\
pool:
  - name: goods
    unit: MELBIS_AGENT_STORE
    command: CmdAdd
    for_each: {file: goods.csv}
    key: goods-${row.sku}
    params: {sku: "${row.sku}", name: "${row.name}", price: "${row.price}"}
"""


def section(page: str, name: str) -> str:
    found = re.search(rf'<section class="doubt" id="{name}">(.*?)</section>', page, re.S)
    assert found is not None, f"no section {name}"
    return found.group(1)


def test_the_report_puts_failed_calls_on_top_with_a_command_that_runs_as_written(
        store: Store, tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "pooler").mkdir(parents=True)
    token = tmp_path / "shop.token"
    token.write_text(store.token, encoding="utf-8")
    token.chmod(0o600)
    (config / "pooler" / "stores.yaml").write_text(
        f"stores:\n  shop: {{url: '{store.url}', token_file: '{token}'}}\n", encoding="utf-8")
    env = {"XDG_CONFIG_HOME": str(config)}
    work = tmp_path / "cron"
    work.mkdir()
    (work / "goods.csv").write_text("sku,name,price\nA-1,Kettle,1.5\nA-2,Mug,cheap\nA-3,Cup,2\n",
                                    encoding="utf-8")
    (work / "pool.yaml").write_text(POOL, encoding="utf-8")
    # As cron runs it: relative paths, the store by its name.
    proc = pooler("run", "pool.yaml", "--store", "shop", "--out", "out", "--journal", "j.sqlite",
                  "--report", "report.html", "--no-stop-on-error", env=env, cwd=work)
    assert proc.returncode == 1, proc.stderr
    page = (work / "report.html").read_text(encoding="utf-8")
    failed = section(page, "failed")
    # Above everything else of the page but the summary.
    assert page.index('id="failed"') < page.index('id="run-1"')
    assert "<h2>1 call failed</h2>" in failed
    assert "A-2" in failed
    assert "The field [price] of the command [CmdAdd] takes float: &#34;cheap&#34; is not a number." in failed
    code = re.search(r"<code>(.*?)</code>", failed, re.S)
    task = re.search(r'<span class="mono" id="task">(.*?)</span>', page)
    assert code is not None
    assert task is not None
    command = html.unescape(code.group(1))
    assert shlex.split(command) == [
        "pooler", "run", str(work / "pool.yaml"), "--task", task.group(1), "--store", "shop",
        "--out", str(work / "out"), "--journal", str(work / "j.sqlite"), "--replan"]
    assert store.token not in page
    # Fixed in the morning, run as written from another folder: only the failed row is sent.
    (work / "goods.csv").write_text("sku,name,price\nA-1,Kettle,1.5\nA-2,Mug,0.9\nA-3,Cup,2\n",
                                    encoding="utf-8")
    sent_before = len(store.ops())
    again = pooler(*shlex.split(command)[1:], env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert [op["params"]["sku"] for op in store.ops()[sent_before:]] == ["A-2"]
