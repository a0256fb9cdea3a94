"""Every JUnit file the tests make, validated against the schema Jenkins' xUnit plugin reads them by.

The schema is junit-10.xsd, the xUnit plugin's JUnit schema (MIT licence), as pytest's source
distribution on PyPI ships it for its own JUnit tests (``testing/example_scripts/junit-10.xsd``):
``python tests/junit_schema.py`` (run by ``make test``) takes it from there into tests/.schemas/.
The check needs the file and the ``xmlschema`` package (the dev extra has it); without either the
tests that write JUnit skip with the reason, and fail instead where ``POOLER_REQUIRE_XMLSCHEMA=1``
asks for them to run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

import pytest

XSD = Path(__file__).resolve().parent / ".schemas" / "junit-10.xsd"
REQUIRE = "POOLER_REQUIRE_XMLSCHEMA"
#: The source distribution the schema is read from, and where in it.
SDIST = "pytest==8.3.5"
MEMBER = "testing/example_scripts/junit-10.xsd"


def _missing(why: str) -> None:
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{why}; {REQUIRE}=1 asks for the JUnit schema tests")
    pytest.skip(f"JUnit files not checked against Jenkins' junit-10.xsd: {why}")


@cache
def _schema() -> Any:
    try:
        import xmlschema  # noqa: PLC0415 - only the tests that write JUnit need it
    except ImportError as exc:
        _missing(f"xmlschema is not installed ({exc}) - pip install xmlschema")
    if not XSD.is_file():
        _missing(f"{XSD} is missing - python tests/junit_schema.py fetches it")
    return xmlschema.XMLSchema(str(XSD))


def jenkins_junit(source: Path | str) -> ET.Element:
    """The JUnit file (a path, or the XML text) parsed, after Jenkins' schema has taken it."""
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    errors = [str(e.reason) + " at " + str(e.path) for e in _schema().iter_errors(text)]
    assert errors == [], f"Jenkins' junit-10.xsd refuses the JUnit file: {errors}"
    return ET.fromstring(text)


def fetch() -> int:
    """Take junit-10.xsd from pytest's source distribution on PyPI into tests/.schemas/."""
    if XSD.is_file():
        return 0
    with tempfile.TemporaryDirectory() as folder:
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                              "--no-binary", ":all:", SDIST, "-d", folder],
                             capture_output=True, text=True, check=False)
        archives = list(Path(folder).glob("pytest-*.tar.gz"))
        if got.returncode != 0 or not archives:
            print(f"JUnit schema: not fetched ({got.stderr.strip()[-300:]}); the JUnit tests will skip",
                  file=sys.stderr)
            return 0
        with tarfile.open(archives[0]) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith(MEMBER))
            data = tar.extractfile(member)
            assert data is not None
            XSD.parent.mkdir(exist_ok=True)
            XSD.write_bytes(data.read())
    print(f"JUnit schema: {XSD.relative_to(Path.cwd()) if XSD.is_relative_to(Path.cwd()) else XSD}, "
          f"from {SDIST}'s {MEMBER}")
    return 0


if __name__ == "__main__":
    raise SystemExit(fetch())
