"""The initial snapshot: the rows that exist before streaming starts, as `r` events.

    pgcdc run --snapshot initial        # default: snapshot when the slot is new, then stream
    pgcdc run --snapshot never          # stream only (a new slot starts at "now")
    pgcdc run --snapshot initial_only   # snapshot, then exit 0; no slot is kept

How (`runner.take_snapshot`):

1. ``CREATE_REPLICATION_SLOT <slot>_snapshot TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')``
   on a replication connection that then stays idle (`slot`). It returns the slot's consistent
   point P and the name of a snapshot exported at exactly P.
2. A guard connection imports the snapshot (``REPEATABLE READ``, ``SET TRANSACTION SNAPSHOT``),
   reads the publication's tables and builds for each the Relation pgoutput would send
   (`tables`), takes ACCESS SHARE locks on them for the whole snapshot (no DDL, TRUNCATE or
   rewrite meanwhile) and fails if one changed between P and its lock.
3. A table whose topic already exists first gets a truncate event (``op = t``,
   ``source.snapshot = "true"``, ``commit_lsn = P``, ``txn_index = -1``, in every partition):
   the snapshot replaces whatever a consumer holds for the table from before (see
   "Interrupted snapshots"); a topic created by this snapshot has nothing to replace.
   Tables are cut into ctid ranges (`chunks`); ``--snapshot-workers`` readers, each on its own
   connection importing the same snapshot, COPY the chunks (`reader`) and produce one event
   per row through the stream's own codecs (same schema, same registry ids) and Kafka sink:
   ``op = r``, ``source.snapshot = "true"``, ``source.commit_lsn = source.lsn = P``,
   ``source.txn_index`` = the row's number (unique per table, see `chunks`).
4. When Kafka has acknowledged every event, the temporary slot is copied into the permanent
   slot (``pg_copy_logical_replication_slot``: confirmed flush LSN = P) and the replication
   connection closes, dropping the temporary slot. Streaming then starts from P.

No gap, no overlap: the exported snapshot and the slot's consistent point are the same moment.
A transaction is visible in the snapshot exactly when it committed before P, and logical
decoding from P sends exactly the transactions committing after P, so every committed change
is either in a snapshot row or in a streamed event, never both, and streamed events carry a
commit LSN after the snapshot's (one corner: a commit record starting exactly at P gets
commit_lsn = P, equal to the snapshot's, which the ordering pair cannot tell apart).

Interrupted snapshots are RESTARTED, not resumed. The slot being read from is temporary: it
exists only as long as the replication connection that created it, so a crash, SIGKILL,
SIGTERM or lost connection during the snapshot drops it (a vanished client is noticed by TCP
keepalives within about a minute) and no slot is left holding WAL. The permanent slot is
created only after every snapshot event was acknowledged, so its existence is the record that
the snapshot completed: the next `pgcdc run` finds no slot and takes a new snapshot (new
consistent point P' > P). The topics exist by then, so the new snapshot starts each table
with its truncate at (P', -1) and the merge job drops everything older: the abandoned
attempt's rows, rows deleted between the attempts (their old `r` events would otherwise stay),
rows of a table without a key (which would otherwise be appended twice). Then it applies the
new snapshot's rows. Restarting costs re-reading the tables; resuming would need the abandoned
attempt's exported snapshot, which does not survive its connection, so a resumed snapshot could
not be consistent with any slot. The same truncate makes a deliberate re-snapshot (slot
dropped after its WAL was lost) replace the old contents. A topic deleted by hand while its
Delta table was kept is the one case it cannot cover: the new topic has no truncate.

``--snapshot initial_only`` takes the same snapshot and exits 0 without keeping a slot (nothing
would consume it); use ``--snapshot initial`` to continue with streaming.

Requirements: PostgreSQL 14+ for chunked reads (TID range scans; 10-13 read each table as one
chunk), a free replication slot for the temporary slot (two are in use for a moment when it is
copied), the REPLICATION attribute (as for the stream).
"""

from .chunks import Chunk, copy_statement, plan_chunks
from .progress import Progress, TableProgress, format_line
from .reader import SESSION_SETTINGS, ChunkReader, open_in_snapshot
from .runner import SnapshotResult, SnapshotSettings, take_snapshot
from .slot import ExportedSnapshot, snapshot_slot_name
from .tables import SnapshotTable, build_relation, published_tables

__all__ = [
    "SESSION_SETTINGS",
    "Chunk",
    "ChunkReader",
    "ExportedSnapshot",
    "Progress",
    "SnapshotResult",
    "SnapshotSettings",
    "SnapshotTable",
    "TableProgress",
    "build_relation",
    "copy_statement",
    "format_line",
    "open_in_snapshot",
    "plan_chunks",
    "published_tables",
    "snapshot_slot_name",
    "take_snapshot",
]
