"""`DeltaHandles` remembers each table's application transaction (txn) versions per table
version: exact whoever writes the table, and read from the log once per version only (on an
object store delta-rs reads every commit since the last checkpoint for it)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from spark_jobs.lake.delta_handles import DeltaHandles

ROWS = pa.table({"id": pa.array([1], pa.int64())})
APP = "job:table"


class CountingTable(DeltaTable):
    """A delta-rs handle counting its log reads for txn versions."""

    reads = 0

    def transaction_version(self, app_id: str) -> int | None:
        CountingTable.reads += 1
        return super().transaction_version(app_id)


def commit(table: DeltaTable | str, batch: int, app: str = APP) -> None:
    write_deltalake(table, ROWS, mode="append", commit_properties=CommitProperties(
        app_transactions=[Transaction(app_id=app, version=batch)]))


def test_txn_versions_are_read_once_per_table_version_and_follow_other_writers(
        tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    commit(path, 1)
    handles = DeltaHandles()
    table = handles.keep(path, CountingTable(path))
    CountingTable.reads = 0

    assert handles.transaction_version(path, table, APP) == 1
    assert handles.transaction_version(path, table, APP) == 1
    assert CountingTable.reads == 1  # the second answer came from memory

    commit(table, 2)  # this handle commits, and says so
    handles.committed(path, table, APP, 2)
    assert handles.transaction_version(path, table, APP) == 2
    assert CountingTable.reads == 1

    commit(path, 5)  # another writer (the Spark path, another handle)
    opened = handles.open(path)
    assert opened is table
    assert handles.transaction_version(path, table, APP) == 5
    assert CountingTable.reads == 2

    assert handles.transaction_version(path, table, "job:other") is None  # per application


def test_a_forgotten_or_replaced_table_is_read_again(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    commit(path, 3)
    handles = DeltaHandles()
    table = handles.keep(path, DeltaTable(path))
    handles.committed(path, table, APP, 3)

    # Rewritten behind the cache at the same version number: gone with `forget`/`keep`.
    (tmp_path / "t").rename(tmp_path / "old")
    commit(path, 7)
    handles.forget(path)
    fresh = handles.open(path)
    assert fresh is not None and fresh.version() == table.version() == 0
    assert handles.transaction_version(path, fresh, APP) == 7
