"""The initial snapshot: the rows that exist before streaming starts, as `r` events.

Contract: a temporary slot exports a snapshot at its consistent point P; readers COPY the
publication's tables in that snapshot (ctid ranges, ``--snapshot-workers`` connections) and
produce one ``r`` event per row (``commit_lsn = P``); a table whose topic existed first gets a
truncate at ``(P, -1)``. Only when Kafka has acknowledged every event is the permanent slot
copied from the temporary one (confirmed at P), so streaming from P misses and repeats nothing,
and an interrupted snapshot leaves no slot and is restarted, never resumed. With
``--exactly-once`` each snapshot producer writes one Kafka transaction, committed at the end.

The argument (no gap, no overlap; restart vs resume; exactly-once; requirements):
docs/design/initial-snapshot.md.
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
