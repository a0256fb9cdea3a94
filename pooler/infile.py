"""Opening an input file (a pool, a params or files source, a data file, an attachment).

Only a regular file is read: a named pipe would block the reader forever and a device never
ends, so anything else is refused before a byte is read.  The file is opened without blocking
and looked at through its descriptor, so nothing can be swapped in between the look and the read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from pooler.errors import InputError, UsageError

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_input(path: Path, display: str | None = None) -> BinaryIO:
    """``path`` opened for reading bytes; ``InputError`` when it is missing, a folder, unreadable,
    or not a regular file."""
    shown = str(path) if display is None else display
    # A document's errors name it as their file; a data file's name is in the message alone.
    where = display
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    except FileNotFoundError:
        raise InputError(f"No such file: {shown}", file=where) from None
    except IsADirectoryError:
        raise InputError(f"No such file: {shown} - it is a folder; name a file.", file=where) from None
    except OSError as exc:
        raise InputError(f"{shown} cannot be read: {exc.strerror or exc} - check its permissions.",
                         file=where) from None
    try:
        refusal = _not_regular(os.fstat(fd).st_mode, shown, where)
        if refusal is None:
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    raise refusal


def _not_regular(mode: int, shown: str, where: str | None) -> InputError | None:
    if stat.S_ISDIR(mode):
        return InputError(f"No such file: {shown} - it is a folder; name a file.", file=where)
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return InputError(f"{shown} is {kind}, not a file - name a regular file.", file=where)


def token_file_warning(path: Path) -> str | None:
    """What ssh says of a private key others can read, said of a token file."""
    try:
        mode = path.expanduser().stat().st_mode
    except OSError:
        return None
    if mode & 0o077:
        return (f"pooler: WARNING: the token file {path} can be read by others (mode {mode & 0o777:o}) - "
                f"chmod 600 {path}")
    return None


def read_token(path: Path, option: str = "--token-file") -> str:
    """The token in a file (given with ``option``): its first line, without surrounding blanks."""
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such token file: {path} - write the token into it, "
                         f"or give another with {option}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the token file {path}: {type(exc).__name__}") from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not token:
        raise UsageError(f"the token file {path} is empty - write the token into it")
    return token
