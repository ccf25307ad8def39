"""Cached delta-rs handles of Delta tables, one per path, kept up to date between batches.

Opening a Delta table reads its log from the last checkpoint on; a handle kept between
batches and brought up to date with `update_incremental` reads only the log entries added
since (by any writer: Spark, delta-rs, another job's maintenance). A handle whose table was
removed or replaced behind its back fails to update: it is dropped and the table opened
again. Storage options come from `storage.options_for` (object stores reached as Spark
reaches them).

Batches applied are known by their Delta application transaction (`txn`) ids. delta-rs keeps
no txn actions in its snapshot: `transaction_version` reads every commit since the last
checkpoint (a GET each on an object store, up to 100 per call). So the handles remember the
txn version per (table, application) together with the table version it was read or written
at: a txn version is a function of the table version, and a table any writer changed since
has another version, so a remembered one is exact or not used.

A handle whose table's newest commit is its own (`committed`) is not brought up to date
before its next use: nothing was added since that this job did not write itself (no log
re-read: on an object store a LIST and a GET per handle and batch, ~4 of a table's ~20
requests per streaming batch). That holds because the writer lease keeps other merge jobs
out and the table's Spark engine says when it writes (`changed`, from `SparkDeltaSink`). A
writer outside the job (a user's OPTIMIZE or DELETE) is caught where it matters, at the next
commit of the handle: its conditional put of the next version fails and delta-rs checks the
other commit for conflicts; a conflict fails the commit, and the job then forgets the handle
(`forget`) and applies that batch through Spark, as for any delta-rs failure."""

from __future__ import annotations

from deltalake import DeltaTable

from .storage import options_for


class DeltaHandles:
    """The handles of one owner (a table's sink, a history sink). Not shared between
    threads: the job writes each table from one thread at a time."""

    def __init__(self) -> None:
        self._tables: dict[str, DeltaTable] = {}
        # (path, application id) -> (table version, its txn version then)
        self._txns: dict[tuple[str, str], tuple[int, int | None]] = {}
        # path -> the version its handle committed last, while no other writer of the job
        # committed after it (`changed`)
        self._ours: dict[str, int] = {}

    def open(self, path: str) -> DeltaTable | None:
        """The up-to-date handle of the Delta table at `path`; None when there is none."""
        cached = self._tables.get(path)
        if cached is not None:
            if self._ours.get(path) == cached.version():
                return cached  # its newest commit is its own: nothing to read (module doc)
            try:
                cached.update_incremental()
                return cached
            except Exception:  # noqa: BLE001 - removed or replaced behind our back: open again
                self.forget(path)
        options = options_for(path)
        if not DeltaTable.is_deltatable(path, storage_options=options):
            return None
        self._tables[path] = table = DeltaTable(path, storage_options=options)
        return table

    def keep(self, path: str, table: DeltaTable) -> DeltaTable:
        """Keep the handle of a table just created (or rewritten) at `path`."""
        self.forget(path)
        self._tables[path] = table
        return table

    def forget(self, path: str) -> None:
        """Drop the handle of `path` (its table is about to move or be rewritten)."""
        self._tables.pop(path, None)
        self._ours.pop(path, None)
        for key in [k for k in self._txns if k[0] == path]:
            del self._txns[key]

    def changed(self, path: str) -> None:
        """Another writer of the job (its Spark path) may have committed to `path`: its
        handle reads the log at its next use."""
        self._ours.pop(path, None)

    def transaction_version(self, path: str, table: DeltaTable, app_id: str) -> int | None:
        """`table.transaction_version(app_id)` of the handle of `path`, read from the log only
        when the table changed since it was last read or written here."""
        version = table.version()
        known = self._txns.get((path, app_id))
        if known is not None and known[0] == version:
            return known[1]
        txn = table.transaction_version(app_id)
        self._txns[(path, app_id)] = (version, txn)
        return txn

    def committed(self, path: str, table: DeltaTable, app_id: str, txn: int | None) -> None:
        """The handle of `path` just committed (or created) its current version with this
        txn version of `app_id` (None: a new table, no batch of it yet): the table's newest
        commit is its own."""
        self._txns[(path, app_id)] = (table.version(), txn)
        self._ours[path] = table.version()
