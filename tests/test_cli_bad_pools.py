"""``pooler check --against STORE`` on every broken pool of tests/pools/, as a CI job runs it.

The headlines (``file:line:column: message``) come from the table of ``test_bad_pools.py``, so each
text is pinned in one place; the only ones added here are the few that the store's tool_list adds
(a step whose fields do not match the tool's declaration).  All the files go through one real
``pooler check`` process; then each file alone, in this process through the same command line
(``pooler.cli.main``), which keeps 75 runs cheap.  The store must see nothing but tool_list.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pytest
from helpers import ROOT, Store, environment, pooler, start_store
from test_bad_pools import EXPECTED

from pooler.cli.main import main

#: What the store's declarations add to the table's problems, after them, file by file.
AGAINST: dict[str, list[str]] = {
    "bad-chunk-no-field.yaml": [
        ("tests/pools/bad-chunk-no-field.yaml:2:5: The command [CmdAdd] needs the field [goods] (jsonl): "
         "it is required - add it to params."),
    ],
    "bad-field-no-chunk.yaml": [
        ("tests/pools/bad-field-no-chunk.yaml:2:5: The command [CmdAdd] needs the field [goods] (jsonl): "
         "it is required - add it to params."),
    ],
    "bad-ref-no-field.yaml": [
        ('tests/pools/bad-ref-no-field.yaml:8:18: The field [id] of the command [CmdRemove] takes '
         'int/json: "@cur" is not a whole number.'),
    ],
    "bad-schema-and-meaning.yaml": [
        ("tests/pools/bad-schema-and-meaning.yaml:17:29: The command [CmdRemove] has no field [colour]. "
         "Its fields: id."),
    ],
    "bad-row-in-chunk.yaml": [
        ("tests/pools/bad-row-in-chunk.yaml:5:14: The command [CmdAdd] has no field [note]. Its fields: "
         "goods."),
    ],
}
NAMES = [name for name, _ in EXPECTED]
#: The pools whose problems sit in a file they read (pool_source, params_source), and how many.
READ = {name: count for name in NAMES
        if (count := sum(not h.startswith(f"tests/pools/{name}") for h in dict(EXPECTED)[name]))}
#: A headline: a path under tests/pools, with line and column when the problem has a place.
HEADLINE = re.compile(r"^tests/pools/\S+?(?::\d+:\d+)?: ")


def expected_of(name: str) -> list[str]:
    return [*dict(EXPECTED)[name], *AGAINST.get(name, [])]


def headlines(out: str) -> list[str]:
    return [line for line in out.splitlines() if HEADLINE.match(line)]


def summary(problems: int, files: int, of: int) -> str:
    return f"{problems} problem{'s' if problems != 1 else ''} in {files} of {of} file{'s' if of != 1 else ''}"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = start_store(tmp_path_factory.mktemp("store"))
    yield store
    store.stop()


def test_the_table_and_the_folder_name_the_same_files() -> None:
    on_disk = sorted(p.name for p in (ROOT / "tests" / "pools").glob("bad-*"))
    assert on_disk == NAMES
    assert set(AGAINST) <= set(NAMES)


def test_every_broken_pool_at_once_is_told_and_nothing_is_sent(shop: Store) -> None:
    proc = pooler("check", *(f"tests/pools/{name}" for name in NAMES), "--against", shop.url,
                  env={"POOLER_TOKEN": shop.token})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == ""
    expected = [line for name in NAMES for line in expected_of(name)]
    assert headlines(proc.stdout) == expected
    # Every file is named: in its headlines, or after a problem of a file it reads.
    lines = proc.stdout.splitlines()
    for name in NAMES:
        pool = f"tests/pools/{name}"
        assert any(line.startswith(f"{pool}:") or line == f"    (read by {pool})" for line in lines), name
    assert sum(line.startswith("    (read by ") for line in lines) == sum(READ.values())
    assert proc.stdout.splitlines()[-1] == summary(len(expected), len(NAMES), len(NAMES))
    assert shop.ops() == []


@pytest.mark.parametrize("name", NAMES)
def test_each_broken_pool_alone(shop: Store, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Paths in the messages are the paths as given: relative to the project's root.
    monkeypatch.chdir(ROOT)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", f"tests/pools/{name}", "--against", shop.url], stdout=out, stderr=err,
                  environ=environment({"POOLER_TOKEN": shop.token}))
    assert (status, err.getvalue()) == (2, "")
    expected = expected_of(name)
    assert headlines(out.getvalue()) == expected
    # A problem in a file the pool reads names the pool on the line after its caret.
    told = [line for line in out.getvalue().splitlines() if line.startswith("    (read by ")]
    assert told == [f"    (read by tests/pools/{name})"] * READ.get(name, 0)
    assert out.getvalue().splitlines()[-1] == summary(len(expected), 1, 1)
    assert shop.ops() == []
