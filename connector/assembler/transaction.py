"""What the assembler emits: complete transactions of changes, and non-transactional messages.

    Output = Transaction | LogicalMessage

`Transaction` is one committed PostgreSQL transaction (plain, streamed or two-phase) with its
`changes` in the order they will be published. Each `Change` is one event: a row change (Insert,
Update, Delete), one relation of a Truncate (a Truncate of three tables is three changes with
consecutive positions, all carrying the same Truncate message), or a transactional logical
decoding message (`relation` is None). `position` is the 0-based index among those events, so
`(commit_lsn, position)` is the `(source.commit_lsn, source.txn_index)` pair of
schemas/README.md.

All of them are immutable. A transaction whose changes were spilled to disk reads them back
lazily each time `changes` is iterated; `Transaction.close()` (or `with transaction:`, or simply
dropping the last reference) frees the spill file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Final, NamedTuple, TypeAlias

from connector.pgoutput.messages import (
    Delete,
    Insert,
    Message,
    Origin,
    Relation,
    Truncate,
    Update,
)

from .spill import SpillFile

# The message a Change carries.
ChangeMessage: TypeAlias = Insert | Update | Delete | Truncate | Message

_OPS: Final[dict[type, str]] = {Insert: "c", Update: "u", Delete: "d", Truncate: "t",
                                Message: "m"}


class Change(NamedTuple):
    """One publishable event of a committed transaction."""

    relation: Relation | None  # the Relation current when the change was decoded; None: Message
    message: ChangeMessage
    wal_lsn: int  # LSN the message came in (XLogData start / the SQL interface's `lsn`)
    position: int  # 0-based index among the transaction's events (source.txn_index)
    xid: int  # top-level transaction id
    commit_lsn: int  # Commit / Stream Commit / Commit Prepared commit LSN (source.commit_lsn)
    commit_timestamp: int  # microseconds since 2000-01-01 UTC

    @property
    def op(self) -> str:
        """Envelope op: c insert, u update, d delete, t truncate; m for a logical message."""
        return _OPS[type(self.message)]


class Changes:
    """The changes of a transaction, in order: sized, iterable any number of times.

    In memory (a list) or, for a spilled transaction, read back batch by batch from its spill
    file on each iteration, so a huge transaction never has to fit in memory at once.
    """

    __slots__ = ("_items", "_spill", "_relations", "_count", "_xid", "_commit_lsn",
                 "_commit_timestamp")

    def __init__(self, items: list[Change], spill: SpillFile | None = None,
                 relations: Sequence[Relation] = (), count: int = 0, xid: int = 0,
                 commit_lsn: int = 0, commit_timestamp: int = 0) -> None:
        self._items = items
        self._spill = spill
        self._relations = relations
        self._count = len(items) if spill is None else count
        self._xid = xid
        self._commit_lsn = commit_lsn
        self._commit_timestamp = commit_timestamp

    def __len__(self) -> int:
        return self._count

    @property
    def spilled(self) -> bool:
        """Read back from a spill file rather than held in memory."""
        return self._spill is not None

    def __iter__(self) -> Iterator[Change]:
        if self._spill is None:
            return iter(self._items)
        return self._read_spilled(self._spill)

    def _read_spilled(self, spill: SpillFile) -> Iterator[Change]:
        if spill.closed:
            raise ValueError("the changes of this transaction were closed (spill file freed)")
        relations = self._relations
        xid, commit_lsn, ts = self._xid, self._commit_lsn, self._commit_timestamp
        position = 0
        new = tuple.__new__
        for batch in spill.batches():
            for rel_index, message, wal_lsn in batch:
                yield new(Change, (relations[rel_index] if rel_index >= 0 else None, message,
                                   wal_lsn, position, xid, commit_lsn, ts))
                position += 1

    def close(self) -> None:
        """Free the spill file, if any (idempotent). Spilled changes cannot be read after."""
        if self._spill is not None:
            self._spill.close()

    def __repr__(self) -> str:
        where = "spilled" if self._spill is not None else "in memory"
        return f"<Changes: {self._count} {where}>"


class Transaction(NamedTuple):
    """A committed transaction, emitted when its commit arrives (in commit order)."""

    xid: int  # top-level transaction id
    commit_lsn: int  # LSN of the commit record (Commit, Stream Commit or Commit Prepared)
    end_lsn: int  # end of the commit record: confirm up to here once all changes are delivered
    commit_timestamp: int  # microseconds since 2000-01-01 UTC
    changes: Changes
    first_wal_lsn: int  # LSN of the transaction's first message (Begin, Stream Start, ...)
    origin: Origin | None = None  # replication origin, when an Origin message came
    streamed: bool = False  # arrived in Stream Start/Stop blocks (protocol >= 2)
    gid: str | None = None  # two-phase: the global transaction id of PREPARE TRANSACTION
    prepare_lsn: int | None = None  # two-phase: LSN of the PREPARE record
    prepare_timestamp: int | None = None  # two-phase: when it was prepared

    def close(self) -> None:
        """Free the spill file of the changes, if any."""
        self.changes.close()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class LogicalMessage(NamedTuple):
    """A non-transactional logical decoding message, emitted as soon as it arrives."""

    message: Message
    wal_lsn: int

    @property
    def prefix(self) -> str:
        return self.message.prefix

    @property
    def content(self) -> bytes:
        return self.message.content

    @property
    def lsn(self) -> int:
        """The LSN of the message record itself."""
        return self.message.lsn


Output: TypeAlias = Transaction | LogicalMessage
