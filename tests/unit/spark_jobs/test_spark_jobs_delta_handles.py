"""`DeltaHandles` remembers each table's application transaction (txn) versions per table
version: exact whoever writes the table, and read from the log once per version only (on an
object store delta-rs reads every commit since the last checkpoint for it)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

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

    commit(path, 5)  # another writer (the Spark path, another handle)...
    handles.changed(path)  # ... which says so (`SparkDeltaSink._spark_writes`)
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


class UpdateCounting(DeltaTable):
    """A delta-rs handle counting how often it reads the log for new commits."""

    updates = 0

    def update_incremental(self) -> None:
        UpdateCounting.updates += 1
        super().update_incremental()


def test_a_handle_whose_table_it_committed_last_reads_no_log_until_another_writer_did(
        tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    commit(path, 1)
    handles = DeltaHandles()
    table = handles.keep(path, UpdateCounting(path))
    UpdateCounting.updates = 0
    assert handles.open(path) is table and UpdateCounting.updates == 1  # not ours: read

    commit(table, 2)
    handles.committed(path, table, APP, 2)
    assert handles.open(path) is table and handles.open(path) is table
    assert UpdateCounting.updates == 1  # its own commit is the newest: nothing to read

    commit(path, 3)  # the job's Spark path
    handles.changed(path)
    assert handles.open(path) is table and UpdateCounting.updates == 2
    assert table.version() == 2 and handles.transaction_version(path, table, APP) == 3


def test_an_outside_writer_unseen_by_a_handle_makes_its_next_merge_fail_not_lose_data(
        tmp_path: Path) -> None:
    """A user's DELETE between two batches, which the handle did not read: its MERGE does not
    commit over it (delta-rs checks the newer commit at the conditional put)."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1, 2], pa.int64())}))
    handles = DeltaHandles()
    table = handles.keep(path, DeltaTable(path))
    commit(table, 1)
    handles.committed(path, table, APP, 1)
    DeltaTable(path).delete("id = 1")  # outside the job
    stale = handles.open(path)
    assert stale is table and stale.version() == 1  # unseen
    with pytest.raises(CommitFailedError):
        (stale.merge(pa.table({"id": pa.array([1], pa.int64())}), "t.id = s.id",
                     source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    handles.forget(path)  # as the job does on a delta-rs failure (then Spark applies it)
    fresh = handles.open(path)
    assert fresh is not None and fresh.version() == 2  # the delete seen
    assert [r["id"] for r in fresh.to_pyarrow_table().to_pylist()] == [2]  # its delete holds
