"""Every JUnit file the tests make, validated against the schema Jenkins' xUnit plugin reads them by.

The schema is tests/schemas/junit-10.xsd (its source and licence are named in it). The check needs
the ``xmlschema`` package (the dev extra has it); without it the tests that write JUnit skip with
the reason, and fail instead where ``POOLER_REQUIRE_XMLSCHEMA=1`` asks for them to run.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

import pytest

XSD = Path(__file__).resolve().parent / "schemas" / "junit-10.xsd"
REQUIRE = "POOLER_REQUIRE_XMLSCHEMA"


@cache
def _schema() -> Any:
    try:
        import xmlschema  # noqa: PLC0415 - only the tests that write JUnit need it
    except ImportError as exc:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"xmlschema is not installed ({exc}); {REQUIRE}=1 asks for the JUnit schema tests")
        pytest.skip("JUnit files not checked against Jenkins' junit-10.xsd: pip install xmlschema")
    return xmlschema.XMLSchema(str(XSD))


def jenkins_junit(source: Path | str) -> ET.Element:
    """The JUnit file (a path, or the XML text) parsed, after Jenkins' schema has taken it."""
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    errors = [str(e.reason) + " at " + str(e.path) for e in _schema().iter_errors(text)]
    assert errors == [], f"Jenkins' junit-10.xsd refuses the JUnit file: {errors}"
    return ET.fromstring(text)
