"""``pooler lsp`` without its extra: one line saying what to install, exit 2, never a traceback."""

from __future__ import annotations

import io
import sys

import pytest

from pooler.cli.main import main


def test_pooler_lsp_without_pygls_says_to_install_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith(("pooler.cli.commands.lsp_cmd", "pooler.lsp."))]:
        monkeypatch.delitem(sys.modules, name)
    # A module set to None in sys.modules cannot be imported: as on an install without the extra.
    for name in ("lsprotocol", "lsprotocol.types", "pygls", "pygls.lsp", "pygls.lsp.server"):
        monkeypatch.setitem(sys.modules, name, None)
    err = io.StringIO()
    assert main(["lsp"], stderr=err) == 2
    assert err.getvalue() == ("pooler lsp: needs pygls and lsprotocol (lsprotocol is not installed) - "
                              "install them with: pip install 'pooler[lsp]'\n")
