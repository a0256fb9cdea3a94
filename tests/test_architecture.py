"""docs/architecture.md tells the truth about the tree: every module listed, each small, stages kept apart.

Which stage may import which is checked by ``lint-imports`` (``make lint``) against the contracts in
pyproject.toml; the tests here make sure those contracts still name the tree as it is.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

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


def test_every_module_is_in_the_architecture_doc() -> None:
    missing = [m for m in modules() if m not in listed()]
    assert not missing, f"docs/architecture.md does not list: {missing}"


def test_the_architecture_doc_lists_no_module_that_is_gone() -> None:
    gone = sorted(m for m in listed() if not (PACKAGE / m).is_file())
    assert not gone, f"docs/architecture.md lists modules that do not exist: {gone}"


def test_the_top_level_shows_the_stages() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert {"pool", "run", "journal", "client", "cli", "mcp", "store", "report", "contract"} <= packages
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    # Only the public API, the entry points and the leaf modules every stage shares stay loose.
    assert len(loose) <= 12, loose


@pytest.mark.parametrize("module", modules())
def test_every_module_is_small(module: str) -> None:
    lines = len((PACKAGE / module).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"pooler/{module} has {lines} lines; split it by job"


def test_the_journal_backends_hold_their_connection_migrations_and_sql_in_at_most_700_lines() -> None:
    # The journal's logic is written once in pooler/journal/; a backend is its connection, its
    # migrations, its queries and what its dialect needs.
    backends = [p for name in ("sqlite", "postgres") for p in (PACKAGE / "journal" / name).glob("*.py")]
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in backends)
    assert lines <= 700, f"the journal backends hold {lines} lines of Python; move what is not the database's"


def test_the_layout_names_every_package() -> None:
    table = set(re.findall(r"^\| `pooler/(\w+)/` \|", DOC.read_text(encoding="utf-8"), re.M))
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert table == packages


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


def import_contracts() -> list[dict[str, Any]]:
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert config["root_package"] == "pooler"
    contracts: list[dict[str, Any]] = config["contracts"]
    return contracts


def contract_modules(contract: dict[str, Any]) -> set[str]:
    """Every module a contract names, in full."""
    names: set[str] = set()
    containers = contract.get("containers", [""])
    for layer in contract.get("layers", []):
        for tail in re.split(r"[|:]", layer):
            names.update(f"{c}.{tail.strip()}" if c else tail.strip() for c in containers)
    names.update(f"{c}.{tail}" for c in containers for tail in contract.get("exhaustive_ignores", []))
    names.update(contract.get("source_modules", []))
    names.update(contract.get("forbidden_modules", []))
    return names


def exists(module: str) -> bool:
    if module.split(".", maxsplit=1)[0] != "pooler":
        return importlib.util.find_spec(module) is not None
    path = ROOT.joinpath(*module.split("."))
    return (path / "__init__.py").is_file() or path.with_suffix(".py").is_file()


def test_every_module_the_import_contracts_name_exists() -> None:
    # A contract over a module that was renamed away would hold by checking nothing.
    missing = sorted(m for c in import_contracts() for m in contract_modules(c) if not exists(m))
    assert not missing, f"pyproject.toml's import contracts name what does not exist: {missing}"


def test_the_layers_contract_gives_every_package_its_place() -> None:
    (layers,) = [c for c in import_contracts() if c["type"] == "layers"]
    assert layers["containers"] == ["pooler"]
    assert layers["exhaustive"] is True
    placed = {m.removeprefix("pooler.") for m in contract_modules(layers)}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages <= placed, sorted(packages - placed)


def forbids(source: str, forbidden: str) -> bool:
    # A contract that allows indirect imports, or ignores some, no longer says what this page does.
    return any(c["type"] == "forbidden"
               and source in c["source_modules"] and forbidden in c["forbidden_modules"]
               and not c.get("allow_indirect_imports") and not c.get("ignore_imports")
               for c in import_contracts())


ENGINE = ("pooler.client", "pooler.pool", "pooler.run")


@pytest.mark.parametrize(("source", "forbidden"), [
    *[(stage, "pooler.store") for stage in (*ENGINE, "pooler.contract")],
    *[(stage, dep) for stage in ENGINE for dep in ("rich", "pooler.cli")],
    *[("pooler.store", stage) for stage in (*ENGINE, "pooler.cli")],
])
def test_the_import_contracts_keep_the_rules_this_page_states(source: str, forbidden: str) -> None:
    assert forbids(source, forbidden), f"no import contract forbids {source} to import {forbidden}"
