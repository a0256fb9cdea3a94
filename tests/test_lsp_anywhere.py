"""The language server's reading of a file at the cursor never fails, wherever the cursor is: every
spot of every pool of the repository (the broken ones too), and every prefix of a pool being typed."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

from pooler.lsp.checking import check_document
from pooler.lsp.complete import complete
from pooler.lsp.context import spot_at
from pooler.lsp.navigate import definition, hover
from pooler.lsp.registry import Declarations
from pooler.pool.declared import load_declarations

FILES = sorted([*ROOT.glob("pools/*.yaml"), *ROOT.glob("tests/pools/*.yaml"),
                *ROOT.glob("tests/pools/*.json")])


def readable(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


@pytest.fixture(scope="module")
def decl() -> Declarations:
    # The reference store's own declarations, as a shop exports them.
    return Declarations(load_declarations(str(ROOT / "pooler" / "store" / "tools")))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_spot_of_a_pool_is_read_without_failing(path: Path, decl: Declarations,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = readable(path)
    if text is None:
        pytest.skip(f"{path.name} is not utf-8: an editor holds other text than the file")
    pool = check_document(str(path), text, None).pool
    lines = text.splitlines()
    for row, line in enumerate(lines):
        for char in range(len(line) + 1):
            spot = spot_at(lines, row, char)
            if spot is not None:
                complete(spot, pool, decl, row)
            hover(lines, row, char, pool, decl)
            definition(lines, row, char, pool)


def test_every_prefix_of_a_pool_being_typed_is_read_without_failing(decl: Declarations) -> None:
    text = (ROOT / "pools" / "demo.yaml").read_text(encoding="utf-8")
    pool = check_document(str(ROOT / "pools" / "demo.yaml"), text, None).pool
    for end in range(0, len(text), 7):
        lines = text[:end].splitlines() or [""]
        row, char = len(lines) - 1, len(lines[-1])
        spot = spot_at(lines, row, char)
        if spot is not None:
            complete(spot, pool, decl, row)
        hover(lines, row, char, pool, decl)
