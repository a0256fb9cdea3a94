"""The manual tells the truth: its links and anchors resolve, its pools pass `pooler check`, the
tests docs/promises.md names exist, docs/cli.md is what the parsers say, and the Python example runs."""

from __future__ import annotations

import json
import re
import runpy
import shutil
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, Store

from pooler.cli.main import main

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Written in the line before a code block that shows a pool wrong on purpose.
NOT_A_POOL = "<!-- not-a-pool -->"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```+|~~~+)\s*(\S*)")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    marked: bool

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def prose_and_blocks(page: Path) -> tuple[list[tuple[int, str]], list[Block]]:
    """The page's lines outside code blocks (numbered from 1), and its code blocks."""
    prose: list[tuple[int, str]] = []
    blocks: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    fence: str | None = None
    start, lang, body = 0, "", []
    #: The last line that is not blank before the block that opens, a block's end included.
    before = ""
    marked = False
    for num, line in enumerate(lines, start=1):
        found = FENCE.match(line)
        if fence is None and found:
            fence, lang, start, body = found.group(1), found.group(2).lower(), num, []
            marked = before == NOT_A_POOL
        elif fence is not None and line.strip() == fence:
            blocks.append(Block(page, start, lang, "\n".join(body) + "\n", marked))
            fence, before = None, line.strip()
        elif fence is not None:
            body.append(line)
        else:
            prose.append((num, line))
            before = line.strip() or before
    assert fence is None, f"{page.relative_to(ROOT)}:{start}: a code block is never closed"
    return prose, blocks


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped except - and _, spaces to -."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_and_blocks(page)[0]:
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links() -> list[tuple[str, Path, str]]:
    found = []
    for page in PAGES:
        for num, line in prose_and_blocks(page)[0]:
            # A link written inside `code` is text, not a link.
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if not re.match(r"^[a-z]+:", target):
                    found.append((f"{page.relative_to(ROOT)}:{num}", page, target))
    return found


def pools() -> list[Block]:
    """Every code block that shows a pool: YAML with a top-level pool key, JSON with one."""
    found = []
    for page in PAGES:
        for block in prose_and_blocks(page)[1]:
            yaml_pool = block.lang in ("yaml", "yml") and re.search(r"^pool:", block.text, re.M)
            json_pool = block.lang == "json" and re.match(r'\s*\{\s*"pool"\s*:', block.text)
            if yaml_pool or json_pool:
                found.append(block)
    return found


def test_the_manual_has_its_pages() -> None:
    names = {p.name for p in PAGES}
    assert {"README.md", "tutorial.md", "pool-file.md", "semantics.md", "cli.md", "operations.md",
            "mcp.md", "python-api.md", "promises.md", "architecture.md"} <= names


def test_the_readme_is_short_and_keeps_the_two_commands_near_the_top() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150
    assert [n for n, line in enumerate(lines, start=1) if len(line) > 300] == []
    blocks = prose_and_blocks(ROOT / "README.md")[1]
    assert blocks[0].text == "make demo\nmake test\n"
    assert blocks[0].line < 10


def test_the_readme_links_every_page_of_the_manual() -> None:
    linked = {t for w, page, t in links() if page.name == "README.md"}
    pages = {f"docs/{p.name}" for p in PAGES if p.parent == ROOT / "docs"} - {"docs/multihost.md"}
    assert pages - linked == set()


@pytest.mark.parametrize(("where", "page", "target"), links(), ids=[w for w, _, _ in links()])
def test_every_relative_link_and_anchor_resolves(where: str, page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    goal = (page.parent / path).resolve() if path else page
    assert goal.exists(), f"{where}: {target} - no such file"
    assert goal.is_relative_to(ROOT), f"{where}: {target} leaves the repository"
    if anchor:
        assert goal.suffix == ".md", f"{where}: {target} - an anchor into a file that is not a page"
        assert anchor in anchors(goal), f"{where}: {target} - {goal.name} has no heading #{anchor}"


def test_the_anchors_follow_githubs_rules() -> None:
    assert slug("Jobs (`into`)") == "jobs-into"
    assert slug("`pooler store serve`") == "pooler-store-serve"
    assert slug("When there is no answer: the outcome") == "when-there-is-no-answer-the-outcome"
    assert slug("Several hosts (PostgreSQL)") == "several-hosts-postgresql"
    assert slug("snake_case and dash-word") == "snake_case-and-dash-word"


def test_a_heading_written_twice_gets_a_number(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A\n\n## Options\n\n```\n## not a heading\n```\n\n## Options\n\n## Options\n",
                    encoding="utf-8")
    assert anchors(page) == {"a", "options", "options-1", "options-2"}


def test_a_block_marked_not_a_pool_is_told_apart(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# A\n\n{NOT_A_POOL}\n\n```yaml\npool: wrong\n```\n\n```yaml\npool: []\n```\n",
                    encoding="utf-8")
    assert [(b.line, b.text, b.marked) for b in prose_and_blocks(page)[1]] == [
        (5, "pool: wrong\n", True), (9, "pool: []\n", False)]


def test_the_manual_shows_pools() -> None:
    # The check below must have something to check: the tutorial's, the reference's, the MCP turn's.
    where = {b.page.name for b in pools()}
    assert {"README.md", "tutorial.md", "pool-file.md", "mcp.md"} <= where


@pytest.mark.parametrize("block", pools(), ids=str)
def test_every_pool_shown_passes_pooler_check(block: Block, tmp_path: Path) -> None:
    if block.marked:
        pytest.skip(f"{block} is marked {NOT_A_POOL}")
    if block.lang == "json":
        json.loads(block.text)
    else:
        yaml.safe_load(block.text)
    # Beside a copy of pools/data, as a pool in pools/ is: a pool shown may read data/goods.csv.
    folder = tmp_path / "pools"
    shutil.copytree(ROOT / "pools" / "data", folder / "data")
    pool = folder / f"shown.{'json' if block.lang == 'json' else 'yaml'}"
    pool.write_text(block.text, encoding="utf-8")
    out, err = StringIO(), StringIO()
    status = main(["check", str(pool)], stdout=out, stderr=err, environ={"HOME": str(tmp_path)})
    assert status == 0, f"{block}: pooler check says:\n{err.getvalue()}{out.getvalue()}"
    *told, last = out.getvalue().splitlines()
    assert last == "1 file valid"
    # All a valid pool is told besides: what its error budgets allow, and its rate limits.
    told_of = (" goes on after up to ", " starts at most ")
    assert all(line.startswith(f"{pool}: ") and any(t in line for t in told_of) for line in told), told


def test_a_pool_shown_wrong_fails_the_check(tmp_path: Path) -> None:
    # The check above can fail: the same path with a pool that names no step it refers to.
    pool = tmp_path / "shown.yaml"
    pool.write_text("pool:\n  - {unit: U, command: C, params: {a: '@nope.id'}}\n", encoding="utf-8")
    out = StringIO()
    assert main(["check", str(pool)], stdout=out, stderr=StringIO(), environ={}) == 2
    assert f"{pool}:2:39: @nope.id names no step - it would be sent as text." in out.getvalue()


def promised_tests() -> list[str]:
    text = (ROOT / "docs" / "promises.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"`(tests/[\w/]+\.py(?:::\w+)?)`", text)))


def test_promises_name_tests() -> None:
    named = promised_tests()
    assert len(named) > 30
    assert any("::" in n for n in named)


@pytest.mark.parametrize("named", promised_tests())
def test_every_test_a_promise_names_exists(named: str) -> None:
    file, _, test = named.partition("::")
    path = ROOT / file
    assert path.is_file(), f"docs/promises.md names {file}, which is not there"
    if test:
        assert re.search(rf"^(?:async )?def {test}\(", path.read_text(encoding="utf-8"), re.M), (
            f"docs/promises.md names {named}, which {file} does not define")


def test_the_command_line_reference_is_current() -> None:
    from pooler.cli import reference  # noqa: PLC0415 - loads every command's parser

    page = ROOT / reference.PAGE
    assert page.read_text(encoding="utf-8") == reference.render(), (
        f"{reference.PAGE} is stale: regenerate it with {reference.REGENERATE}")


def test_the_command_line_reference_names_every_command_and_exit_status() -> None:
    from pooler.cli import reference  # noqa: PLC0415
    from pooler.cli.commands import COMMANDS  # noqa: PLC0415
    from pooler.exits import ExitStatus  # noqa: PLC0415

    text = reference.render()
    for command in [*COMMANDS, "journal upgrade", "store serve", "mcp"]:
        assert f"## `pooler {command}`\n" in text, command
    for option in ("`--against STORE\\|DIR\\|FILE`", "`--env`", "`--fault KIND:RATE`", "`--journal URL`"):
        assert option in text, option
    for status in ExitStatus:
        assert f"| {int(status)} | `{status.name}` |" in text


def test_the_command_line_reference_is_the_same_at_any_terminal_width(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pooler.cli import reference  # noqa: PLC0415

    monkeypatch.setenv("COLUMNS", "40")
    narrow = reference.render()
    monkeypatch.setenv("COLUMNS", "250")
    assert reference.render() == narrow


def test_the_reference_check_says_how_to_regenerate_a_stale_page(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pooler.cli import reference  # noqa: PLC0415

    monkeypatch.chdir(tmp_path)
    assert reference.main([]) == 2
    assert capsys.readouterr().err == "no docs/ folder here: run this from the repository's root\n"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cli.md").write_text("# old\n", encoding="utf-8")
    assert reference.main(["--check"]) == 1
    assert capsys.readouterr().err == "docs/cli.md is stale: regenerate it with make docs\n"
    assert reference.main([]) == 0
    assert reference.main(["--check"]) == 0


def python_example() -> str:
    blocks = [b for b in prose_and_blocks(ROOT / "docs" / "python-api.md")[1] if b.lang == "python"]
    assert len(blocks) == 1
    return blocks[0].text


def test_the_python_api_example_drives_a_run(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    example = tmp_path / "example.py"
    example.write_text(python_example(), encoding="utf-8")
    monkeypatch.setenv("POOLER_STORE", store.url)
    monkeypatch.setenv("POOLER_TOKEN", store.token)
    monkeypatch.setenv("POOLER_EXAMPLE_DIR", str(tmp_path))
    runpy.run_path(str(example), run_name="__main__")
    printed = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"completed \S+ \['completed', 'completed'\]", printed[0])
    assert printed[1] == "completed ['skipped', 'skipped']"
    assert store.token not in (tmp_path / "journal.sqlite").read_bytes().decode("utf-8", "replace")
    assert [(op["unit"], op["command"]) for op in store.ops()] == [
        ("MELBIS_AGENT_CURRENCY", "CmdAdd"), ("MELBIS_AGENT_STORE", "CmdAdd")]
