"""No dead code: every function, class and method of the package is used by name somewhere in the
package itself (a test calling it does not count: a name only tests use is kept alive for nothing)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pooler"
PYPROJECT = PACKAGE.parent / "pyproject.toml"

#: Names called by others than pooler's code: Python itself (a module's ``__dir__``), the base
#: class of the reference store's HTTP handler, and the store's commands, found by their name in
#: a tool_run call.
CALLED_FROM_OUTSIDE = {
    "__init__.py": {"__dir__"},
    "store/server.py": {"log_message", "send_error", "do_POST"},
}
STORE_COMMAND = re.compile(r"^Cmd[A-Z]\w*$")


def defined(tree: ast.Module) -> list[str]:
    """The module's functions and classes, and the methods of its classes (not the dunder ones)."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        if isinstance(node, ast.ClassDef):
            names.extend(sub.name for sub in node.body
                         if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef)
                         and not (sub.name.startswith("__") and sub.name.endswith("__")))
    return names


def test_every_function_and_class_of_the_package_is_used_in_the_package() -> None:
    texts = {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}
    corpus = "\n".join(texts.values()) + PYPROJECT.read_text(encoding="utf-8")
    words = Counter(re.findall(r"\w+", corpus))
    unused = []
    for path, text in texts.items():
        module = path.relative_to(PACKAGE).as_posix()
        for name in defined(ast.parse(text)):
            if name in CALLED_FROM_OUTSIDE.get(module, set()):
                continue
            if module.startswith("store/tools/") and STORE_COMMAND.match(name):
                continue
            # The definition is one use; a name met nowhere else is dead.
            if words[name] <= 1:
                unused.append(f"{module}: {name}")
    assert unused == []
