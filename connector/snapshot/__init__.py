"""Snapshots: table rows published as ``r`` events, besides the streamed changes. Two features:

* `initial`: the initial snapshot (``pgcdc run --snapshot initial``). An exported snapshot at
  the creation of the slot, read by parallel workers in heap block ranges before streaming
  starts; no gap and no overlap with the stream. Its modules: `initial.coordinator` (from
  start to finish), `initial.plan` (block ranges), `initial.workers` and `initial.reader` (the
  readers), `initial.reports` and `initial.progress` (what they report, how it is shown),
  `initial.guard` (locks), `initial.transaction` (``--exactly-once``).
* `incremental`: incremental snapshots while streaming (DBLog: key-ordered chunks between a
  low and a high watermark). Requested through the signal table (`incremental.signals`:
  ``pgcdc snapshot``, a re-sync after DDL: `incremental.resync`, a new table:
  `incremental.watcher`), run by `incremental.driver`; the algorithm and why it is correct:
  `incremental.window`.

Shared by both: the published tables as pgoutput describes them (`tables`), the COPY text
parser (`copytext`). The snapshot slot (`slot`) is the initial snapshot's, also used by the
merge job's verify.
"""

from .initial import SnapshotResult, SnapshotSettings, take_snapshot
from .slot import ExportedSnapshot, snapshot_slot_name
from .tables import SnapshotTable, build_relation, published_table, published_tables

__all__ = [
    "ExportedSnapshot",
    "SnapshotResult",
    "SnapshotSettings",
    "SnapshotTable",
    "build_relation",
    "published_table",
    "published_tables",
    "snapshot_slot_name",
    "take_snapshot",
]
