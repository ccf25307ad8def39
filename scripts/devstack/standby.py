"""A PostgreSQL 17+ primary and a physical streaming standby on loopback ports (failover tests).

The primary holds a physical slot for the standby and lists it in `synchronized_standby_slots`
(logical walsenders send nothing the standby has not flushed); the standby is a
`pg_basebackup -R` copy streaming through that slot, with `hot_standby_feedback` and, unless
told otherwise, `sync_replication_slots` (failover slots are copied to it).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from . import process
from .errors import StackError
from .ports import free_port
from .postgres import Postgres

PHYSICAL_SLOT = "pgcdc_standby"


class _Standby(Postgres):
    def init(self) -> None:  # the data directory is the base backup
        if not (self.data_dir / "PG_VERSION").exists():
            raise StackError(f"no base backup in {self.data_dir}")


class StandbyPair:
    """`primary` and `standby` (Postgres objects); after `promote()` the standby is writable."""

    def __init__(self, bin_dir: Path, base_dir: Path, settings: dict[str, str],
                 sync_slots: bool = True) -> None:
        self.primary = Postgres(bin_dir, base_dir / "primary", free_port(),
                                {**settings, "synchronized_standby_slots": f"'{PHYSICAL_SLOT}'"})
        self.standby = _Standby(bin_dir, base_dir / "standby", free_port(), dict(settings))
        self.sync_slots = sync_slots

    @property
    def dsn(self) -> str:
        """Both servers; libpq picks the writable one (either, after a promotion)."""
        return (f"host=127.0.0.1,127.0.0.1 port={self.primary.port},{self.standby.port} "
                "user=postgres dbname=postgres target_session_attrs=read-write")

    def start(self) -> None:
        self.primary.start()
        standby = self.standby
        standby.base_dir.mkdir(parents=True, exist_ok=True)
        process.chown_to_service_user(standby.base_dir)
        # -C -S: the physical slot the primary keeps for this standby; -R: standby.signal and
        # primary_conninfo/primary_slot_name in postgresql.auto.conf.
        process.run(standby._tool("pg_basebackup", "-D", str(standby.data_dir), "-R", "-C",
                                  "-S", PHYSICAL_SLOT, "-X", "stream", "-c", "fast",
                                  "-d", self.primary.dsn), "pg_basebackup")
        conninfo = f"{self.primary.dsn} application_name=pgcdc_standby"
        conf = {
            # Slot sync connects to a database: primary_conninfo must name one.
            "primary_conninfo": f"'{conninfo}'",
            "primary_slot_name": f"'{PHYSICAL_SLOT}'",
            "hot_standby_feedback": "on",
            "sync_replication_slots": "on" if self.sync_slots else "off",
            "unix_socket_directories": f"'{standby.base_dir}'",
            # Copied from the primary, it would name a slot this server lacks once promoted,
            # and its logical walsenders would wait for that slot forever.
            "synchronized_standby_slots": "''",
        }
        with open(standby.data_dir / "postgresql.auto.conf", "a") as fh:
            fh.writelines(f"{key} = {value}\n" for key, value in conf.items())
        standby.start()
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._psql(self.primary, "SELECT count(*) FROM pg_stat_replication"
                          " WHERE state = 'streaming'") == "1":
                return
            time.sleep(0.2)
        raise StackError(f"standby not streaming after {timeout}s; see {self.standby.log_file}")

    def crash_primary(self) -> None:
        """`pg_ctl stop -m immediate`: no shutdown checkpoint, nothing more sent to the standby."""
        process.run(self.primary._tool("pg_ctl", "stop", "-w", "-m", "immediate", "-D",
                                       str(self.primary.data_dir)), "PostgreSQL immediate stop")

    def promote(self) -> None:
        process.run(self.standby._tool("pg_ctl", "promote", "-w", "-t", "60", "-D",
                                       str(self.standby.data_dir)), "PostgreSQL promote")

    def stop(self) -> None:
        for server in (self.standby, self.primary):
            try:
                server.stop()
            except StackError:
                pass

    @staticmethod
    def _psql(server: Postgres, query: str) -> str:
        out = subprocess.run([str(server.bin_dir / "psql"), "-XAtq", "-d", server.dsn,
                              "-c", query], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()
