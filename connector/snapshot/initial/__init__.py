"""The initial snapshot: the rows that exist before streaming starts, as `r` events.

    pgcdc run --snapshot initial        # default: snapshot when the slot is new, then stream
    pgcdc run --snapshot never          # stream only (a new slot starts at "now")
    pgcdc run --snapshot initial_only   # snapshot, then exit 0; no slot is kept

How (`coordinator.take_snapshot`):

1. ``CREATE_REPLICATION_SLOT <slot>_snapshot TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')``
   on a replication connection that then stays idle (`connector.snapshot.slot`). It returns
   the slot's consistent point P and the name of a snapshot exported at exactly P.
2. A guard connection imports the snapshot (``REPEATABLE READ``, ``SET TRANSACTION SNAPSHOT``),
   reads the publication's tables and builds for each the Relation pgoutput would send
   (`connector.snapshot.tables`), takes ACCESS SHARE locks on them for the whole snapshot (no
   DDL, TRUNCATE or rewrite meanwhile) and fails if one changed between P and its lock
   (`guard`).
3. A table whose topic already exists first gets a truncate event (``op = t``,
   ``source.snapshot = "true"``, ``commit_lsn = P``, ``txn_index = -1``, in every partition):
   the snapshot replaces whatever a consumer holds for the table from before (see
   "Interrupted snapshots"); a topic created by this snapshot has nothing to replace.
   Tables are cut into ctid ranges (`plan`); ``--snapshot-workers`` readers (`workers`), each on
   its own connection importing the same snapshot, COPY the ranges (`reader`) and produce one
   event per row through the stream's own codecs (same schema, same registry ids) and Kafka
   sink, reporting as they go (`reports`, shown by `progress`): ``op = r``,
   ``source.snapshot = "true"``, ``source.commit_lsn = source.lsn = P``,
   ``source.txn_index`` = the row's number (unique per table, see `plan`).
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

Exactly-once (``--exactly-once``). Resuming an interrupted snapshot (skip the chunks an earlier
attempt committed, read the rest) is not sound: the committed chunks show the tables at the old
point P, but a re-run can only read at a new point P' and stream from P' (the exported snapshot
and the temporary slot at P died with their connection, and with them the WAL between P and
P'). Every change between P and P' to a row of a skipped chunk would be lost (an update even
moves a row to another ctid range, so it could be in neither chunk or in both). Keeping a
permanent slot at P to stream P..P' closes the gap but re-delivers what the re-read chunks
already show and holds WAL after every failed attempt: that is the watermark scheme of an
incremental snapshot, not a resume. So the snapshot is still restarted, and instead the
abandoned attempt is made invisible to ``read_committed`` consumers:

- every snapshot producer -- the coordinator (truncates) and each reader (rows) -- writes into
  one Kafka transaction (``transactional.id`` ``pgcdc-<db>-<slot>-snapshot`` and ``...-<n>``
  for reader n, `connector.sink.transactional.SnapshotTransaction`) that stays open until every
  reader has all its events in Kafka; then the coordinator commits (truncates first) and tells
  the readers to commit. A crash before that point leaves only open transactions, which the
  re-run's producers abort when they start (same ids; a killed reader dies with the
  coordinator), so a ``read_committed`` consumer sees, per table, one truncate (the topic
  existed) and exactly one ``r`` event per row, all from the new attempt, then the stream.
- Where duplicates remain for ``read_committed`` consumers: (1) a crash between the first of
  these commits and the creation of the permanent slot (the readers exiting and
  ``pg_copy_logical_replication_slot``: about a second) -- the next run snapshots again, and a
  consumer sees the committed attempt's rows, then the new truncate and the new rows; (2) a
  snapshot producer whose transaction reaches half of ``transaction.timeout.ms`` (15 min for
  the snapshot unless set: the broker's default ``transaction.max.timeout.ms``) commits early
  at a chunk boundary (logged as a warning), so a crash after that leaves those rows visible
  in the same way. In both cases the truncate makes the folded state and the merge job's
  tables exact; only a consumer ignoring truncates sees rows twice.
- Readers a re-run does not start (fewer chunks than ``--snapshot-workers``) are fenced by the
  coordinator, but a re-run with a lower ``--snapshot-workers`` than the killed attempt does
  not know the surplus readers' ids: their open transactions hold ``read_committed`` consumers
  of those partitions until ``transaction.timeout.ms`` aborts them (a delay, no duplicate).
- The cost: ``read_committed`` consumers see a snapshot only once it is complete (it is one
  transaction per producer), and ``read_uncommitted`` ones also see the aborted attempts.

``--snapshot initial_only`` takes the same snapshot and exits 0 without keeping a slot (nothing
would consume it); use ``--snapshot initial`` to continue with streaming.

Requirements: PostgreSQL 14+ for chunked reads (TID range scans; 10-13 read each table as one
chunk), a free replication slot for the temporary slot (two are in use for a moment when it is
copied), the REPLICATION attribute (as for the stream).
"""

from .coordinator import SnapshotResult, SnapshotSettings, take_snapshot
from .plan import BlockRange, copy_statement, plan_chunks
from .progress import Progress, TableProgress, format_line
from .reader import SESSION_SETTINGS, ChunkReader, open_in_snapshot

__all__ = [
    "SESSION_SETTINGS",
    "BlockRange",
    "ChunkReader",
    "Progress",
    "SnapshotResult",
    "SnapshotSettings",
    "TableProgress",
    "copy_statement",
    "format_line",
    "open_in_snapshot",
    "plan_chunks",
    "take_snapshot",
]
