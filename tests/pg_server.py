"""A real PostgreSQL server for tests: a fresh cluster in a temporary folder, on a free port of
127.0.0.1, run as the ``postgres`` user (the server refuses root)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Set to 1 (CI) to make a missing server a failure instead of a skip.
REQUIRE = "POOLER_REQUIRE_POSTGRES"


def server_bin() -> Path | None:
    """The folder of initdb/pg_ctl: ``$POOLER_PG_BIN``, else PATH, else Debian's newest."""
    given = os.environ.get("POOLER_PG_BIN")
    if given:
        return Path(given)
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                      key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class PgServer:
    bin: Path
    folder: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bin / "pg_ctl"), *args], check=True,
                       capture_output=True, timeout=60)

    def start(self) -> None:
        self._ctl("-w", "-D", str(self.folder / "data"), "-l", str(self.folder / "log"), "-o",
                  f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off "
                  "-c max_connections=200", "start")

    def stop(self) -> None:
        self._ctl("-w", "-D", str(self.folder / "data"), "-m", "fast", "stop")

    def close(self) -> None:
        """Stops the server and removes its cluster: a test session's database is some hundreds of
        megabytes, and sessions beside each other would otherwise fill the disk with them."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def new_database(self, name: str) -> str:
        """A fresh empty database on the server; its URL."""
        import psycopg  # noqa: PLC0415

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"


def start_server() -> PgServer:
    """A new cluster, started; raises ``RuntimeError`` when PostgreSQL is not here."""
    found = server_bin()
    if found is None or not (found / "initdb").exists():
        raise RuntimeError("PostgreSQL's server binaries (initdb, pg_ctl) were not found "
                           "(set POOLER_PG_BIN, or install Debian's postgresql package)")
    folder = Path(tempfile.mkdtemp(prefix="pooler-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        # The server refuses to run as root: the cluster belongs to the postgres user.
        shutil.chown(folder, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, str(found / "initdb"), "-D", str(folder / "data"), "-A", "trust",
                    "-U", "postgres", "--no-sync"], check=True, capture_output=True, timeout=120)
    server = PgServer(found, folder, _free_port(), as_user)
    server.start()
    return server


def main() -> int:
    """``python tests/pg_server.py``: say plainly whether the PostgreSQL tests will run."""
    import sys  # noqa: PLC0415

    found = server_bin()
    if found is not None and (found / "initdb").exists():
        print(f"PostgreSQL tests: run, with the server binaries in {found}")
        return 0
    required = os.environ.get(REQUIRE) == "1"
    print(f"PostgreSQL tests: {'FAIL' if required else 'SKIPPED'} - no initdb/pg_ctl found (PATH, "
          "/usr/lib/postgresql/*/bin, or POOLER_PG_BIN); install Debian's postgresql package to run them",
          file=sys.stderr if required else sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
