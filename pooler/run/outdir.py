"""Folders under ``--out`` entered without following a symbolic link, and safe file names in them.

``--out`` itself is the operator's: it may be a link they made.  Every folder below it that pooler
writes into is created owner-only and opened with ``O_NOFOLLOW`` from its parent's descriptor, so a
link planted there (``<out>/tables -> /etc``) is refused, and no file outside ``--out`` is written,
read or deleted through it, even if the link appears while pooler runs.
"""

from __future__ import annotations

import errno
import hashlib
import os
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pooler.errors import InputError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: The bytes of one name piece at most, so ``<prefix>.<table>.jsonl`` stays within 255 bytes.
_MAX_BYTES = 100
_HASH_MARK = "~"


def safe_name(name: str) -> str:
    """``name`` as one harmless, readable file-name piece; distinct names give distinct pieces.

    Letters and digits of every script (``товары``), ``_``, ``.`` and ``-`` are kept; anything
    else becomes ``_``, a leading dot ``_``, and a piece longer than 100 bytes is cut.  A name
    that was changed gets ``~`` and a short hash of the whole name, and ``~`` is never kept
    from a name, so a changed name never meets a name that was kept as it is.
    """
    text = unicodedata.normalize("NFC", str(name))
    safe = "".join(c if (c.isalnum() or c in "_.-") and c.isprintable() else "_" for c in text)
    if safe.startswith("."):
        safe = "_" + safe.lstrip(".")
    cut = safe.encode("utf-8")[:_MAX_BYTES].decode("utf-8", "ignore")
    if cut == str(name) and cut:
        return cut
    digest = hashlib.sha256(str(name).encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{cut or '_'}{_HASH_MARK}{digest}"


def link_refusal(path: Path) -> InputError:
    return InputError(f"{path} is a symbolic link - pooler never follows a link under --out; "
                      "remove the link, or give another --out.")


@contextmanager
def folder(out: Path, parts: tuple[str, ...], *, create: bool) -> Iterator[int | None]:
    """A descriptor of ``out/parts...``, or ``None`` when it does not exist and ``create`` is off.

    ``out`` is created (owner-only) when missing; each folder of ``parts`` is created owner-only
    and entered with ``O_NOFOLLOW``: a symbolic link there raises ``InputError``.
    """
    if create:
        _mkdir(out)
    fd = _enter(None, out, out, create=create)
    try:
        here = out
        for part in parts:
            if fd is None:
                break
            here = here / part
            if create:
                _mkdir_at(fd, part, here)
            inner = _enter(fd, part, here, create=create)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _enter(parent: int | None, name: Path | str, here: Path, *, create: bool) -> int | None:
    """``name`` opened as a folder: ``out`` itself as named, a folder below it (in ``parent``)
    without following a link; ``None`` when there is none and ``create`` is off."""
    flags = os.O_RDONLY | _DIRECTORY | (0 if parent is None else _NOFOLLOW)
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as exc:
        if parent is not None and exc.errno in (errno.ELOOP, errno.ENOTDIR) and here.is_symlink():
            raise link_refusal(here) from None
        if exc.errno == errno.ENOTDIR and not create and parent is not None:
            # A file in the folder's place holds no folder's files; writing there fails.
            return None
        raise InputError(f"cannot open the folder {here}: {exc.strerror or exc} - check --out.") from None


def _mkdir_at(parent: int, name: str, here: Path) -> None:
    try:
        os.mkdir(name, 0o700, dir_fd=parent)
    except FileExistsError:
        pass
    except OSError as exc:
        raise InputError(f"cannot create the folder {here}: {exc.strerror or exc} - check --out.") from None


def check_real(out: Path, path: Path) -> None:
    """Refuse ``path`` when a folder between ``out`` and it is a symbolic link (for reading)."""
    here = out
    for part in path.relative_to(out).parts[:-1]:
        here = here / part
        if here.is_symlink():
            raise link_refusal(here)


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the folder {path}: {exc.strerror or exc} - check --out.") from None
