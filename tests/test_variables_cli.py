"""Variables end to end: ``pooler run --json`` against the store, whose CmdEcho answers with the
fields exactly as it received them, so every value below is the value that went over the wire.

Where the secrets go (a variable from the environment echoed back, masked in stdout, stderr, the
log, table files and the journal) is held by ``test_leaks.py`` and ``test_secrets.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import Store, answer_of, pooler

POOL = """\
vars:
  n: 1
  s: {default: xyz, description: a text}
  flag: {default: false}
  sku: {description: the goods, env: POOL_SKU}
pool:
  - name: e
    unit: MELBIS_AGENT_TEST
    command: CmdEcho
    key: echo-${s}-${n}
    params: {n: "${n}", s: "${s}", text: "n=${n} s=${s} flag=${flag}", flag: "${flag}", sku: "${sku}",
             lit: "$${n}"}
"""


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    path = tmp_path / "vars.yaml"
    path.write_text(POOL, encoding="utf-8")
    return path


def run(store: Store, tmp_path: Path, pool: Path, *extra: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return pooler("run", str(pool), "--store", store.url, "--json", "--out", str(tmp_path / "out"),
                  "--journal", str(tmp_path / "journal.sqlite"), *extra,
                  env={"POOLER_TOKEN": store.token, **(env or {})})


def echoed(store: Store, tmp_path: Path, pool: Path, *extra: str,
           env: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The step's entry in the answer, and the params the store received."""
    proc = run(store, tmp_path, pool, *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    (entry,) = answer_of(proc)["steps"]
    return entry, store.ops()[-1]


def test_defaults_fill_the_params_keeping_their_types(store: Store, tmp_path: Path, pool: Path) -> None:
    entry, op = echoed(store, tmp_path, pool, "--var", "sku=TEA-1", "--task", "t-defaults")
    sent = {"n": 1, "s": "xyz", "text": "n=1 s=xyz flag=false", "flag": False, "sku": "TEA-1", "lit": "${n}"}
    assert op["params"] == sent
    assert entry["detail"] == sent
    assert entry["key"] == "echo-xyz-1"
    assert op["idempotency_key"] == "t-defaults:echo-xyz-1"


@pytest.mark.parametrize(("given", "n", "s"), [
    (["n=3", "s=abc"], 3, "abc"),         # a number arrives as a number, a word as text
    (["n=2.5", "s=42"], 2.5, 42),         # read as YAML scalars: 42 is a number too
    (["s='42'"], 1, "42"),                # quoted, it is the text 42
    (["s="], 1, ""),                      # empty is the empty text
    (["s=a=b c"], 1, "a=b c"),            # the value is everything after the first =
])
def test_var_overrides_arrive_with_their_yaml_type(store: Store, tmp_path: Path, pool: Path,
                                                   given: list[str], n: Any, s: Any) -> None:
    flags = [part for text in [*given, "sku=S"] for part in ("--var", text)]
    _, op = echoed(store, tmp_path, pool, *flags)
    assert (op["params"]["n"], op["params"]["s"]) == (n, s)
    assert type(op["params"]["n"]) is type(n)
    assert type(op["params"]["s"]) is type(s)
    text_s = s if isinstance(s, str) else str(s)
    assert op["params"]["text"] == f"n={n} s={text_s} flag=false"


def test_var_over_vars_file_over_environment_over_default(store: Store, tmp_path: Path, pool: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("n: 7\ns: from-file\nflag: true\n", encoding="utf-8")
    entry, op = echoed(store, tmp_path, pool, "--vars-file", str(values), "--var", "s=from-cli",
                       env={"POOL_SKU": "SKU-from-env"})
    assert op["params"] == {"n": 7, "s": "from-cli", "text": "n=7 s=from-cli flag=true", "flag": True,
                            "sku": "SKU-from-env", "lit": "${n}"}
    # A value read from the environment is a secret: the store got it, the answer shows ***.
    assert entry["detail"]["sku"] == "***"
    assert entry["key"] == "echo-from-cli-7"
    # The vars file wins over the environment.
    values.write_text("sku: SKU-from-file\n", encoding="utf-8")
    _, op = echoed(store, tmp_path, pool, "--vars-file", str(values), env={"POOL_SKU": "SKU-from-env"})
    assert (op["params"]["sku"], op["params"]["n"], op["params"]["s"]) == ("SKU-from-file", 1, "xyz")


def test_an_undeclared_var_is_refused_with_a_guess(store: Store, tmp_path: Path, pool: Path) -> None:
    proc = run(store, tmp_path, pool, "--var", "sku=S", "--var", "nn=3")
    assert (proc.returncode, answer_of(proc)["status"]) == (2, "refused")
    assert proc.stderr == (f"pooler: --var nn: {pool} declares no variable [nn] - did you mean n?\n"
                           "pooler: refused before the first step; nothing was sent.\n")
    far = run(store, tmp_path, pool, "--var", "sku=S", "--var", "colour=red")
    assert far.returncode == 2
    assert far.stderr.splitlines()[0] == (f"pooler: --var colour: {pool} declares no variable [colour] - "
                                          "it declares: n, s, flag, sku.")
    assert store.ops() == []
    assert not (tmp_path / "out").exists()


def test_a_vars_file_may_set_names_the_pool_does_not_declare(store: Store, tmp_path: Path,
                                                             pool: Path) -> None:
    # One prod.yaml serves several pools: what this pool does not declare is left aside.
    values = tmp_path / "values.yaml"
    values.write_text("n: 7\nss: from-file\nwarehouse: north\n", encoding="utf-8")
    proc = run(store, tmp_path, pool, "--vars-file", str(values), "--var", "sku=S")
    assert proc.returncode == 0, proc.stderr
    assert answer_of(proc)["steps"][0]["detail"]["n"] == 7
    assert "ss" not in proc.stderr
    told = run(store, tmp_path, pool, "--vars-file", str(values), "--var", "sku=S", "--verbose")
    assert told.returncode == 0, told.stderr
    assert (f"{values}:2:1: {values} sets [ss], which {pool} does not declare: ignored - did you mean s?\n"
            f"{values}:3:1: {values} sets [warehouse], which {pool} does not declare: ignored\n"
            ) in told.stderr


def test_a_variable_left_without_a_value_refuses_the_pool(store: Store, tmp_path: Path, pool: Path) -> None:
    proc = run(store, tmp_path, pool)
    assert (proc.returncode, answer_of(proc)["status"]) == (2, "refused")
    assert proc.stderr == (
        f"{pool}:5:3: The variable [sku] has no value - give it with --var sku=VALUE, set the environment "
        "variable POOL_SKU, or give it a default under vars.\n"
        "    5 |   sku: {description: the goods, env: POOL_SKU}\n"
        "      |   ^\n"
        "pooler: refused before the first step; nothing was sent.\n")
    # An empty environment variable is a value; an unset one is not.
    assert run(store, tmp_path, pool, env={"POOL_SKU": ""}).returncode == 0
    assert [op["params"]["sku"] for op in store.ops()] == [""]


def test_a_variable_in_the_key_makes_a_call_of_its_own(store: Store, tmp_path: Path, pool: Path) -> None:
    def once(*flags: str) -> str:
        proc = run(store, tmp_path, pool, "--task", "nightly", "--var", "sku=S", *flags)
        assert proc.returncode == 0, proc.stderr
        (entry,) = answer_of(proc)["steps"]
        return f"{entry['status']} {entry['key']}"

    assert once("--var", "s=abc") == "completed echo-abc-1"
    # The same value in the same task: the key is done, nothing is sent.
    assert once("--var", "s=abc") == "skipped echo-abc-1"
    # Another value is another key: sent, and then done in its turn.
    assert once("--var", "s=def", "--var", "n=2") == "completed echo-def-2"
    assert once("--var", "s=def", "--var", "n=2") == "skipped echo-def-2"
    assert [(op["params"]["s"], op["idempotency_key"]) for op in store.ops()] == [
        ("abc", "nightly:echo-abc-1"), ("def", "nightly:echo-def-2")]
