"""One merge job writes a lake: the writer lease at `<target>/_pgcdc/writer`.

Two jobs writing one target would both apply batches and commit the same tables and the same
cuts manifest under different checkpoints (or, sharing one, both write its offsets): Delta's
commits stay atomic, but the checkpoints, tombstone expiry, cuts and history each assume they
are the only writer. So a job takes the lease before its query starts and keeps it renewed;
a second job is refused with one line naming the holder.

The lease is a one-row Delta table written through delta-rs (local disk and object stores
alike: on S3 delta-rs commits with a conditional put, `If-None-Match`, so of two commits of one
version exactly one wins), holding the owner (a random id per job run), its host and process
id, and when it last renewed. Taking or renewing it is an overwrite of that row committed as
the version after the one read, with no retry on a newer version (a compare-and-swap: of
concurrent takers one commits, the others fail, read the row again and find it held). The
rules (`free_for`):

* the row's owner is this job, or there is no row, or it was released: take it;
* its renewal is older than `TTL_S`: the holder is gone (a crash, a lost machine): take it;
* its holder is a process of this host that no longer exists (a `kill -9`, a crashed
  driver restarted on the same machine): take it at once rather than after `TTL_S`;
* its holder is this very process (a job whose query stopped and another started after it:
  Spark itself refuses two active queries on one checkpoint in a process): take it;
* otherwise it is held: refuse.

The job renews every `RENEW_S` from a thread of its own (a batch may take longer than the
TTL) while its query is active, and releases it when the query has stopped; a renewal that
finds another process the owner (this job stalled past the TTL and another took over) stops
the job. A clean stop releases the lease. Targets delta-rs does not reach
(`hdfs://`) have no lease (lake/storage.py)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from .storage import DELTA_RS_SCHEMES, options_for, scheme

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

LEASE_DIR = "_pgcdc/writer"
TTL_S = 60.0
RENEW_S = 15.0
SCHEMA = pa.schema([("owner", pa.string()), ("host", pa.string()), ("pid", pa.int64()),
                    ("renewed_ms", pa.int64())])


class LakeError(RuntimeError):
    """The lake cannot be written by this job (one line saying why and what to do)."""


class LakeBusy(LakeError):
    """Another merge job holds the lake (one line: who, since when, what to do)."""


@dataclass(frozen=True)
class Holder:
    owner: str
    host: str
    pid: int
    renewed_ms: int  # 0: released


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def free_for(me: str, current: Holder | None, now_ms: int, ttl_s: float, host: str,
             pid: int, alive: Callable[[int], bool] = _alive) -> bool:
    """Whether `me` (a job of process `pid` on `host`) may take (or keep) the lease that
    `current` holds (the module doc's rules)."""
    if current is None or current.owner == me or current.renewed_ms == 0:
        return True
    if now_ms - current.renewed_ms > ttl_s * 1000:
        return True
    return current.host == host and (current.pid == pid or not alive(current.pid))


class Lease:
    """The writer lease of `target` for one job run."""

    def __init__(self, target: str, ttl_s: float = TTL_S, renew_s: float = RENEW_S) -> None:
        self.path = f"{target.rstrip('/')}/{LEASE_DIR}"
        self.target = target
        self.ttl_s, self.renew_s = ttl_s, renew_s
        self.owner = uuid.uuid4().hex
        self.host, self.pid = socket.gethostname(), os.getpid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The lease's handle, brought up to date at each read (the commits since, by any job:
        # 2 requests on an object store) rather than opened again (every commit since the
        # last log checkpoint, read twice: up to ~200 requests per renewal)
        self._table: DeltaTable | None = None

    @staticmethod
    def applies(target: str) -> bool:
        return scheme(target) in DELTA_RS_SCHEMES

    def _read(self) -> tuple[DeltaTable, Holder | None]:
        from deltalake import DeltaTable

        table = self._table
        if table is not None:
            try:
                table.update_incremental()
            except Exception:  # noqa: BLE001 - removed behind our back: open it again
                table = None
        if table is None:
            options = options_for(self.path)
            if not DeltaTable.is_deltatable(self.path, storage_options=options):
                try:
                    DeltaTable.create(self.path, SCHEMA, mode="ignore", storage_options=options)
                except Exception:  # noqa: BLE001 - another job created it at the same moment
                    pass
            table = self._table = DeltaTable(self.path, storage_options=options)
        rows = table.to_pyarrow_table().to_pylist()
        return table, Holder(**rows[0]) if rows else None

    def _write(self, renewed_ms: int, must_own: bool) -> None:
        """Commit our row over the one read, unless it is held by another (`LakeBusy`)."""
        from deltalake import CommitProperties, write_deltalake

        for _ in range(5):
            table, current = self._read()
            now = time.time_ns() // 1_000_000
            if must_own and (current is None or current.owner != self.owner):
                raise LakeBusy(self._busy(current, now, taken=True))
            if not free_for(self.owner, current, now, self.ttl_s, self.host, self.pid):
                raise LakeBusy(self._busy(current, now, taken=False))
            row = {"owner": self.owner, "host": self.host, "pid": self.pid,
                   "renewed_ms": renewed_ms}
            try:
                # No retry on top of a newer version: the commit is a compare-and-swap
                write_deltalake(table, pa.Table.from_pylist([row], schema=SCHEMA),
                                mode="overwrite",
                                commit_properties=CommitProperties(max_commit_retries=0))
                return
            except Exception as exc:  # noqa: BLE001 - a concurrent commit: read it and decide
                log.debug("writer lease: concurrent commit (%s), reading it again", exc)
        raise LakeBusy(f"the lake {self.target} is being taken by another merge job at the "
                       "same moment; start one job per target")

    def _busy(self, current: Holder | None, now_ms: int, taken: bool) -> str:
        if current is None:
            return f"the writer lease of {self.target} vanished; restart the job"
        ago = (now_ms - current.renewed_ms) / 1000
        who = f"another merge job (host {current.host}, pid {current.pid})"
        if taken:
            return (f"{who} took over the lake {self.target} ({ago:.0f} s ago) while this job "
                    f"did not renew its lease for {self.ttl_s:.0f} s: this job stops")
        return (f"{who} writes the lake {self.target} (its lease renewed {ago:.0f} s ago): "
                f"one merge job per target; stop it first, or if it is gone, start again in "
                f"{max(0.0, self.ttl_s - ago):.0f} s")

    def acquire(self, on_lost: Callable[[str], None],
                active: Callable[[], bool] = lambda: True) -> None:
        """Take the lease (`LakeBusy` when another job holds it) and renew it from a thread
        while `active()` (the job's query runs), releasing it once not, or until `release`;
        `on_lost(message)` when a renewal finds another process took it."""
        try:
            self._write(time.time_ns() // 1_000_000, must_own=False)
        except LakeBusy:
            raise
        except Exception as exc:  # the store refused us or is out of reach: say so in a line
            first = next((line.strip() for line in str(exc).splitlines() if line.strip()),
                         type(exc).__name__)
            raise LakeError(f"cannot write the lake {self.target} (its writer lease at "
                            f"{self.path}): {first[:300]}; check the target, the store's "
                            "address and credentials (docs/object-storage.md)") from exc
        log.info("writer lease of %s taken (renewed every %g s, expires after %g s)",
                 self.target, self.renew_s, self.ttl_s)

        def renew() -> None:
            while not self._stop.wait(self.renew_s):
                if not active():
                    self._write_quietly(0)
                    return
                try:
                    self._write(time.time_ns() // 1_000_000, must_own=True)
                except LakeBusy as exc:
                    _, holder = self._read()
                    if holder is None or (holder.host, holder.pid) != (self.host, self.pid):
                        on_lost(str(exc))  # else a later job of this process took it over
                    return
                except Exception as exc:  # noqa: BLE001 - the store is down: try again
                    log.warning("writer lease of %s not renewed: %s", self.target, exc)
        self._thread = threading.Thread(target=renew, name="pgcdc-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop renewing and release the lease, so the next job need not wait."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._write_quietly(0)

    def _write_quietly(self, renewed_ms: int) -> None:
        try:
            self._write(renewed_ms, must_own=True)
        except LakeBusy:
            pass  # another job holds it already
        except Exception as exc:  # noqa: BLE001 - it expires by itself
            log.warning("writer lease of %s not released (%s): it expires in %g s",
                        self.target, exc, self.ttl_s)
