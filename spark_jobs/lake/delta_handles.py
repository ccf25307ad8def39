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
has another version, so a remembered one is exact or not used."""

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

    def open(self, path: str) -> DeltaTable | None:
        """The up-to-date handle of the Delta table at `path`; None when there is none."""
        cached = self._tables.get(path)
        if cached is not None:
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
        for key in [k for k in self._txns if k[0] == path]:
            del self._txns[key]

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
        txn version of `app_id` (None: a new table, no batch of it yet)."""
        self._txns[(path, app_id)] = (table.version(), txn)
