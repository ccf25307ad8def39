"""Transaction assembler (pure: no sockets, no database, no Kafka; only local spill files).

    Assembler(spill_bytes=..., spill_changes=..., spill_dir=...)
        .feed(wal_lsn, message) -> Transaction | LogicalMessage | None
        .feed_all(pairs) -> Iterator[Output]
        .oldest_open_lsn, .relations, .types, .pending_xids, .prepared_gids, .close()
    Transaction   a committed transaction: xid, commit_lsn, end_lsn, commit_timestamp, changes,
                  first_wal_lsn, origin, streamed, gid, prepare_lsn, prepare_timestamp
    Change        one event: relation, message, wal_lsn, position, xid, commit_lsn,
                  commit_timestamp (+ op)
    LogicalMessage  a non-transactional logical decoding message: message, wal_lsn
"""

from .assembler import DEFAULT_SPILL_BYTES, Assembler, estimate_size
from .relations import RelationCache
from .spill import SpillFile
from .transaction import Change, ChangeMessage, Changes, LogicalMessage, Output, Transaction

__all__ = [
    "DEFAULT_SPILL_BYTES",
    "Assembler",
    "Change",
    "ChangeMessage",
    "Changes",
    "LogicalMessage",
    "Output",
    "RelationCache",
    "SpillFile",
    "Transaction",
    "estimate_size",
]
