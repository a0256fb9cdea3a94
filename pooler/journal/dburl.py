"""A PostgreSQL URL or DSN as messages may show it: never with its password, in any spelling
libpq accepts, and libpq's own error texts (which quote a malformed URI back whole) the same way.

The spellings: the user info of a URI (``postgresql://user:pw@host/db``, also with an ``@`` left
unescaped in the password, where libpq splits at the first ``@`` and the rest reads as the host),
``password=`` in a URI's query (``?password=pw``, ``&password=pw``), and ``password=`` in a keyword
DSN (``host=h password=pw dbname=d``, quoted ``password='a b'`` too).  Masking is two passes: the
spellings above wherever they stand in a text, then every password value the configured URL holds
(raw, percent-decoded, and the pieces libpq may quote of one with an unescaped ``@``) by
``pooler.redact``'s rule, so a libpq text that quotes only the password, or a fragment of it, is
masked as well.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import unquote

from pooler.redact import MASK, Redactor

#: The environment variable that names the journal when ``--journal`` is not given (here, beside
#: the masking of its passwords, which every command does before it loads any journal).
JOURNAL_ENV = "POOLER_JOURNAL"
#: The schemes of a PostgreSQL URI, as libpq reads them.
SCHEMES = ("postgresql://", "postgres://")
#: The shortest piece of a password split at an unescaped ``@`` that is masked on its own.
_PIECE = 3

# The user info of a URI: from the scheme to the last ``@`` of the word (greedy, so a password holding
# an unescaped ``@`` is masked whole; a ``"`` ends it, as libpq quotes a URI in double quotes).
_USERINFO = re.compile(r"(?P<head>postgres(?:ql)?://[^\s:@/?#'\"]*:)[^\s\"]*@", re.IGNORECASE)
# ``password=`` in a URI's query: its value ends at the next parameter.
_QUERY = re.compile(r"(?P<head>[?&]password=)[^&\s'\"#]*", re.IGNORECASE)
# ``password=`` in a keyword DSN: a quoted value (with backslash escapes) or a word.
_KEYWORD = re.compile(r"(?P<head>(?<![\w?&.-])password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s'\"]+)",
                      re.IGNORECASE)


#: A keyword DSN (``host=db dbname=pooler ...``) begins with one of libpq's connection keywords.
_DSN = re.compile(r"^\s*(?:host|hostaddr|port|dbname|user|password|passfile|service|sslmode|"
                  r"connect_timeout|application_name|options|target_session_attrs)\s*=")


def is_postgres(spec: str | None) -> bool:
    """Whether a ``--journal`` value names a PostgreSQL database (a URI or a keyword DSN) rather
    than a SQLite file."""
    return spec is not None and (spec.lower().startswith(SCHEMES) or _DSN.match(spec) is not None)


def masked(text: str) -> str:
    """``text`` with the password of every PostgreSQL URI or DSN in it replaced by ``***``."""
    if "password" not in text.lower() and "://" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"{m['head']}{MASK}@", text)
    text = _QUERY.sub(lambda m: f"{m['head']}{MASK}", text)
    return _KEYWORD.sub(lambda m: f"{m['head']}{MASK}", text)


def passwords(spec: str | None) -> list[str]:
    """Every password value ``spec`` holds, as it is written and as libpq decodes it, and the
    pieces of one with an unescaped ``@`` (libpq quotes the part after the first ``@`` as a host)."""
    if not spec:
        return []
    found: list[str] = []
    if spec.lower().startswith(SCHEMES):
        rest = spec.split("://", 1)[1]
        first = rest.find("@")
        if first >= 0:
            # The user info ends at the last @ before the path, query or fragment that follows it.
            ends = [i for i in (rest.find(c, first) for c in "/?#") if i >= 0]
            at = rest.rfind("@", 0, min(ends, default=len(rest)))
            _, colon, password = rest[:at].partition(":")
            if colon:
                found.append(password)
                found.extend(piece for piece in password.split("@") if len(piece) >= _PIECE)
        query = rest.partition("?")[2].partition("#")[0]
        for pair in query.split("&"):
            name, eq, value = pair.partition("=")
            if eq and unquote(name).lower() == "password":
                found.append(value)
    else:
        for match in _KEYWORD.finditer(spec):
            value = match.group(0)[len(match["head"]):]
            if value.startswith("'"):
                value = re.sub(r"\\(.)", r"\1", value[1:-1] if value.endswith("'") else value[1:])
            found.append(value)
    decoded = [unquote(value) for value in found]
    return [value for value in dict.fromkeys(found + decoded) if value]


class DbText:
    """Masks the texts told about one database: the spellings above, then its own passwords."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._redactor = Redactor(passwords(spec))

    def __call__(self, text: str) -> str:
        return self._redactor.text(masked(text))

    @property
    def shown(self) -> str:
        """The URL or DSN itself as messages show it."""
        return self(self.spec)

    def error(self, exc: BaseException) -> str:
        """The first line of a libpq (psycopg) error, masked."""
        return self((str(exc).strip().splitlines() or [type(exc).__name__])[0])


def shown(spec: str) -> str:
    """``spec`` as messages show it: a URL or DSN without its password."""
    return DbText(spec).shown


def argument(spec: str) -> str:
    """``spec`` as a command a message tells to run gives it: shown, and quoted for the shell when
    it holds a space (a keyword DSN)."""
    text = shown(spec)
    return shlex.quote(text) if any(c.isspace() for c in text) else text
