"""Numbers as a spreadsheet writes them: ``5306,19`` or ``1 234,56`` read with a step's ``decimal``.

A value is a number only where it is wholly one: an optional sign, digits (in groups of three
separated by a space, a no-break space U+00A0 or a narrow no-break space U+202F, as Russian and
French exports write thousands), and a fraction after the decimal separator.  Anything else stays
text, and so does a number written with a leading zero (``007``, a code, not seven).
"""

from __future__ import annotations

import re
from functools import lru_cache

#: The decimal separators ``for_each.decimal`` may name.
DECIMALS: tuple[str, ...] = (".", ",")
#: What may stand between groups of thousands.
GROUPS = " \u00a0\u202f"


@lru_cache(maxsize=4)
def _pattern(decimal: str) -> re.Pattern[str]:
    groups = f"[{GROUPS}]"
    whole = rf"(?:0|[1-9]\d{{0,2}}(?:{groups}\d{{3}})+|[1-9]\d*)"
    return re.compile(rf"[+-]?{whole}(?:{re.escape(decimal)}\d+)?")


def read_number(text: str, decimal: str) -> int | float | None:
    """``text`` as the number it wholly is with ``decimal`` as the separator, or None (text)."""
    if not text or len(text) > 64 or not _pattern(decimal).fullmatch(text):
        return None
    plain = text.translate({ord(c): None for c in GROUPS}).replace(decimal, ".")
    return float(plain) if "." in plain else int(plain)
