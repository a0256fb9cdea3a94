"""docs/architecture.md tells the truth about the tree: every module listed, each small, stages kept apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "pooler"
DOC = ROOT / "docs" / "architecture.md"
#: "About 400 lines at most": a module may run a little over while it keeps one job.
MAX_LINES = 440
#: The reference store's tools are data-like modules, one per declared tool, listed as a folder.
SKIP = ("store/tools/",)


def modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(SKIP):
            found.append(rel)
    return found


def listed() -> set[str]:
    """The modules of the doc's tables: rows that start with a module's path."""
    return set(re.findall(r"^\| `((?:\w+/)*\w+\.py)`", DOC.read_text(encoding="utf-8"), re.M))


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_every_module_is_in_the_architecture_doc() -> None:
    missing = [m for m in modules() if m not in listed()]
    assert not missing, f"docs/architecture.md does not list: {missing}"


def test_the_architecture_doc_lists_no_module_that_is_gone() -> None:
    gone = sorted(m for m in listed() if not (PACKAGE / m).is_file())
    assert not gone, f"docs/architecture.md lists modules that do not exist: {gone}"


def test_the_top_level_shows_the_stages() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert {"pool", "run", "client", "cli", "mcp", "store", "report", "shared", "contract"} <= packages
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    # Only the public API, the entry points and the leaf modules every stage shares stay loose.
    assert len(loose) <= 10, loose


@pytest.mark.parametrize("module", modules())
def test_every_module_is_small(module: str) -> None:
    lines = len((PACKAGE / module).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"pooler/{module} has {lines} lines; split it by job"


@pytest.mark.parametrize("module", [m for m in modules() if m.startswith("client/")])
def test_the_client_never_imports_the_store(module: str) -> None:
    assert not [n for n in imports_of(PACKAGE / module) if n.startswith("pooler.store")]


@pytest.mark.parametrize("module", [m for m in modules() if m.startswith(("pool/", "run/", "contract/"))])
def test_the_pool_the_run_and_the_contract_never_import_the_store(module: str) -> None:
    # What they share with the store (declarations, field types) is in contract/, imported by both.
    assert not [n for n in imports_of(PACKAGE / module) if n.startswith("pooler.store")]


def test_the_layout_names_every_package() -> None:
    table = set(re.findall(r"^\| `pooler/(\w+)/` \|", DOC.read_text(encoding="utf-8"), re.M))
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert table == packages


@pytest.mark.parametrize("module", [m for m in modules() if m.startswith(("run/", "pool/", "client/"))])
def test_below_the_cli_nothing_imports_rich_or_the_cli(module: str) -> None:
    bad = [n for n in imports_of(PACKAGE / module)
           if n.split(".")[0] == "rich" or n == "pooler.cli" or n.startswith("pooler.cli.")]
    assert not bad, f"pooler/{module} imports {bad}"


@pytest.mark.parametrize("module", [m for m in modules() if not m.startswith("cli/") and m != "__main__.py"])
def test_nothing_below_the_cli_exits(module: str) -> None:
    text = (PACKAGE / module).read_text(encoding="utf-8")
    assert "sys.exit(" not in text or module in ("store/cli.py", "demo.py"), module


def test_the_public_api_is_declared_and_importable() -> None:
    import pooler  # noqa: PLC0415

    assert pooler.__all__
    for name in pooler.__all__:
        assert getattr(pooler, name) is not None, name


def test_the_public_api_lists_what_it_exports() -> None:
    import pooler  # noqa: PLC0415

    assert set(pooler.__all__) == {"__version__", *pooler._EXPORTS}
