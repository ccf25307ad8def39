"""Helpers of the producer tests: run `pgcdc run` for real (a subprocess, as users run it)
and read back what it published."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

PGCDC = str(Path(sys.executable).parent / "pgcdc")


@dataclass
class ProducerRun:
    """One `pgcdc run` configuration (unique slot/publication/topic prefix) and its process.

    Each `start` writes a log of its own in the directory given; `output` is the latest's.
    The slot's state is read on `dsn`, or on the server `on` names (a two-host DSN's member
    after a failover)."""

    dsn: str
    bootstrap: str
    registry_url: str
    tables: str
    extra: list[str] = field(default_factory=list)  # more `pgcdc run` arguments
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    proc: subprocess.Popen[str] | None = None
    log: Path | None = None
    # the "streaming slot" lines of this log that wait_streaming returned on
    _streams_waited: int = field(default=0, init=False, repr=False)
    # where this start's process serves its metrics (port, host to scrape; None: off)
    _metrics: tuple[int, str] | None = field(default=None, init=False, repr=False)

    @property
    def prefix(self) -> str:
        return f"t{self.tag}"

    @property
    def slot(self) -> str:
        return f"slot_{self.tag}"

    def command(self) -> list[str]:
        return [PGCDC, "run", "--dsn", self.dsn, "--bootstrap-servers", self.bootstrap,
                "--schema-registry-url", self.registry_url, "--topic-prefix", self.prefix,
                "--slot", self.slot, "--publication", f"pub_{self.tag}", "--tables",
                self.tables, "--schema-check-interval-s", "0.5", *self.extra]

    def start(self, log_dir: Path, *, wait: bool = True) -> None:
        """Start the process (a new log in `log_dir`); with `wait`, until it streams."""
        self.log = log_dir / f"pgcdc-{self.tag}-{time.monotonic_ns()}.log"
        self._streams_waited = 0
        command = self.command()
        self._metrics = _metrics_address(command)
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                         text=True)
        if wait:
            self.wait_streaming()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _assert_alive(self, waiting_for: str) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"pgcdc exited {self.proc.returncode} before {waiting_for}:\n"
                                 f"{self.output()[-4000:]}")

    def wait_streaming(self, timeout: float = 60.0, *, on: str | None = None) -> None:
        """Until this start's process streams its slot: it logged that it streams (after
        START_REPLICATION; connector/pipeline.py), once more than at the previous wait (a
        reconnect after a failover logs it again), the slot is active on the server (`on`), and
        with `--metrics-port` its metrics say `pgcdc_connected 1`. An active slot alone is not
        enough: the connection that creates the slot holds it before the stream starts."""
        deadline = time.monotonic() + timeout
        marker = f"streaming slot {self.slot} from "
        with psycopg.connect(on or self.dsn, autocommit=True) as conn:
            while time.monotonic() < deadline:
                streams = self.output().count(marker)
                if streams > self._streams_waited:
                    row = conn.execute("SELECT active FROM pg_replication_slots WHERE "
                                       "slot_name=%s", (self.slot,)).fetchone()
                    if row and row[0] and (
                            self._metrics is None or _connected(*self._metrics)):
                        self._streams_waited = streams
                        return
                self._assert_alive("streaming")
                time.sleep(0.1)
        raise AssertionError(f"pgcdc not streaming after {timeout}s: {self.output()[-4000:]}")

    def output(self) -> str:
        """What the latest start logged so far."""
        return self.log.read_text() if self.log and self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send `sig` (unless it exited already); its exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def confirmed_lsn(self, *, on: str | None = None) -> int:
        lsn = _confirmed(on or self.dsn, self.slot)
        assert lsn is not None, f"no slot {self.slot}"
        return lsn

    def wait_confirmed(self, lsn: int, timeout: float = 60.0, *, on: str | None = None) -> None:
        """Until the slot confirmed `lsn`: everything before it is in Kafka. Fails at once if
        the process exited without."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            confirmed = _confirmed(on or self.dsn, self.slot)
            if confirmed is not None and confirmed >= lsn:
                return
            if self.proc is not None:
                self._assert_alive(f"confirming {lsn}")
            time.sleep(0.2)
        raise AssertionError(f"slot not confirmed to {lsn} within {timeout}s: "
                             f"{self.output()[-4000:]}")

    def wait_caught_up(self, timeout: float = 180.0, *, on: str | None = None) -> None:
        """Until the slot confirmed everything written so far (so it is all in Kafka)."""
        self.wait_confirmed(current_lsn(on or self.dsn), timeout, on=on)

    def drop(self) -> None:
        """Kill the process, drop its slot and publication (a server gone: nothing to drop)."""
        if self.alive():
            self.stop(signal.SIGKILL)
        try:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
                # The process is gone: wait only for its walsender to release the slot. A run
                # that failed before creating one has none to wait for.
                for _ in range(50):
                    row = conn.execute("SELECT active FROM pg_replication_slots"
                                       " WHERE slot_name = %s", (self.slot,)).fetchone()
                    if row is None:
                        break
                    if not row[0]:
                        conn.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
                        break
                    time.sleep(0.1)
                conn.execute(f"DROP PUBLICATION IF EXISTS pub_{self.tag}")
        except psycopg.OperationalError:
            pass


def _metrics_address(command: list[str]) -> tuple[int, str] | None:
    """The `--metrics-port` of a `pgcdc run` command and the address to scrape it on (None:
    metrics are off)."""
    def value(flag: str) -> str | None:
        return command[command.index(flag) + 1] if flag in command else None

    port, host = value("--metrics-port"), value("--metrics-host")
    if not port or not int(port):
        return None
    return int(port), "127.0.0.1" if host in (None, "0.0.0.0") else str(host)


def _connected(port: int, host: str) -> bool:
    """Whether `pgcdc run`'s metrics say the replication stream is connected."""
    try:
        return scrape_metrics(port, host).get("pgcdc_connected") == 1
    except httpx.HTTPError:  # not serving yet
        return False


def _confirmed(dsn: str, slot: str) -> int | None:
    """The slot's confirmed_flush_lsn (None: no such slot, or it has none yet)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots"
                           " WHERE slot_name = %s", (slot,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def current_lsn(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()
    assert row is not None
    return int(row[0])


def scrape_metrics(port: int, host: str = "127.0.0.1") -> dict[str, float]:
    """The pgcdc_* samples of `pgcdc run --metrics-port` by name."""
    text = httpx.get(f"http://{host}:{port}/metrics", timeout=10).text
    samples = {}
    for line in text.splitlines():
        if line.startswith("pgcdc_"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples
