"""Cached delta-rs handles of Delta tables, one per path, kept up to date between batches.

Opening a Delta table reads its log from the last checkpoint on; a handle kept between
batches and brought up to date with `update_incremental` reads only the log entries added
since (by any writer: Spark, delta-rs, another job's maintenance). A handle whose table was
removed or replaced behind its back fails to update: it is dropped and the table opened
again. Storage options come from `storage.options_for` (object stores reached as Spark
reaches them)."""

from __future__ import annotations

from deltalake import DeltaTable

from .storage import options_for


class DeltaHandles:
    """The handles of one owner (a table's sink, a history sink). Not shared between
    threads: the job writes each table from one thread at a time."""

    def __init__(self) -> None:
        self._tables: dict[str, DeltaTable] = {}

    def open(self, path: str) -> DeltaTable | None:
        """The up-to-date handle of the Delta table at `path`; None when there is none."""
        cached = self._tables.get(path)
        if cached is not None:
            try:
                cached.update_incremental()
                return cached
            except Exception:  # noqa: BLE001 - removed or replaced behind our back: open again
                del self._tables[path]
        options = options_for(path)
        if not DeltaTable.is_deltatable(path, storage_options=options):
            return None
        self._tables[path] = table = DeltaTable(path, storage_options=options)
        return table

    def keep(self, path: str, table: DeltaTable) -> DeltaTable:
        """Keep the handle of a table just created (or rewritten) at `path`."""
        self._tables[path] = table
        return table

    def forget(self, path: str) -> None:
        """Drop the handle of `path` (its table is about to move or be rewritten)."""
        self._tables.pop(path, None)
