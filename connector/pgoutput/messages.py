"""pgoutput messages as immutable, slotted values (names and fields from the protocol spec).

NamedTuples because they are the cheapest immutable objects CPython can build (the decoder
makes one per row change). Equality is made type-aware below, so `StreamStop() != ()` and an
`Insert` never equals a tuple of the same fields.

Conventions for every class:
- LSNs are ints (see `lsn.lsn_to_str`), timestamps are ints of microseconds since 2000-01-01 UTC
  (see `timestamps.pg_timestamp_to_datetime`), xids and OIDs are unsigned ints.
- `xid` on Message, Relation, Type, Insert, Update, Delete and Truncate is set only for messages
  inside a Stream Start/Stop block (protocol >= 2), otherwise None.
- `flags` fields the spec calls "currently unused" are kept as sent.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NamedTuple, TypeAlias


class UnchangedToast:
    """The 'u' TupleData kind: a TOASTed value the update did not change, so it was not sent."""

    __slots__ = ()
    _instance: UnchangedToast | None = None

    def __new__(cls) -> UnchangedToast:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"  # pickles as the module-level singleton


UNCHANGED_TOAST: Final = UnchangedToast()


class BinaryValue(bytes):
    """A 'b' (binary format) column value: the type's send-function output, undecoded."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"BinaryValue({bytes(self)!r})"


# A TupleData column: None ('n'), UNCHANGED_TOAST ('u'), str ('t') or BinaryValue ('b').
ColumnValue: TypeAlias = str | BinaryValue | UnchangedToast | None
TupleData: TypeAlias = tuple[ColumnValue, ...]
OldTupleKind: TypeAlias = Literal["K", "O"]

# Truncate option bits.
TRUNCATE_CASCADE: Final = 1
TRUNCATE_RESTART_IDENTITY: Final = 2
# Message flags bit.
MESSAGE_TRANSACTIONAL: Final = 1
# RelationColumn flags bit.
COLUMN_KEY: Final = 1


class Begin(NamedTuple):
    """'B': start of a (non-streamed) transaction."""

    final_lsn: int
    commit_timestamp: int
    xid: int


class Message(NamedTuple):
    """'M': a logical decoding message (`pg_logical_emit_message`)."""

    xid: int | None
    flags: int
    lsn: int
    prefix: str
    content: bytes

    @property
    def transactional(self) -> bool:
        return bool(self.flags & MESSAGE_TRANSACTIONAL)


class Commit(NamedTuple):
    """'C': end of a transaction."""

    flags: int
    commit_lsn: int
    end_lsn: int
    commit_timestamp: int


class Origin(NamedTuple):
    """'O': the transaction was replayed from another node (replication origin)."""

    origin_lsn: int  # the LSN of the commit on the origin server
    name: str


class RelationColumn(NamedTuple):
    """One column of a Relation message."""

    flags: int
    name: str
    type_oid: int
    type_modifier: int  # atttypmod, -1 when the type has none

    @property
    def key(self) -> bool:
        """Part of the replica identity (the key sent in 'K' tuples)."""
        return bool(self.flags & COLUMN_KEY)


class Relation(NamedTuple):
    """'R': describes a table; sent before its first change and again after it changes."""

    xid: int | None
    relation_id: int
    namespace: str  # empty for pg_catalog
    name: str
    replica_identity: str  # pg_class.relreplident: 'd' default, 'n' nothing, 'f' full, 'i' index
    columns: tuple[RelationColumn, ...]


class Type(NamedTuple):
    """'Y': names a non-built-in data type (enum, domain, ...) used by a following Relation."""

    xid: int | None
    type_oid: int
    namespace: str  # empty for pg_catalog
    name: str


class Insert(NamedTuple):
    """'I': a new row ('N' tuple)."""

    xid: int | None
    relation_id: int
    new: TupleData


class Update(NamedTuple):
    """'U': a changed row. `old` is the 'K' key or 'O' full old row (see `old_kind`), or None."""

    xid: int | None
    relation_id: int
    old_kind: OldTupleKind | None
    old: TupleData | None
    new: TupleData


class Delete(NamedTuple):
    """'D': a removed row: its 'K' key or 'O' full old row (see `old_kind`)."""

    xid: int | None
    relation_id: int
    old_kind: OldTupleKind
    old: TupleData


class Truncate(NamedTuple):
    """'T': TRUNCATE of one or more relations."""

    xid: int | None
    options: int
    relation_ids: tuple[int, ...]

    @property
    def cascade(self) -> bool:
        return bool(self.options & TRUNCATE_CASCADE)

    @property
    def restart_identity(self) -> bool:
        return bool(self.options & TRUNCATE_RESTART_IDENTITY)


class StreamStart(NamedTuple):
    """'S': a block of changes of an in-progress (streamed) transaction follows."""

    xid: int
    first_segment: bool


class StreamStop(NamedTuple):
    """'E': end of a stream block."""


class StreamCommit(NamedTuple):
    """'c': a streamed transaction committed."""

    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_timestamp: int


class StreamAbort(NamedTuple):
    """'A': a streamed (sub)transaction aborted; xid == subxid for the top-level transaction.

    `abort_lsn`/`abort_timestamp` are sent only with protocol 4 and parallel streaming.
    """

    xid: int
    subxid: int
    abort_lsn: int | None = None
    abort_timestamp: int | None = None


class BeginPrepare(NamedTuple):
    """'b': start of a prepared transaction (two-phase, protocol >= 3)."""

    prepare_lsn: int
    end_lsn: int
    prepare_timestamp: int
    xid: int
    gid: str


class Prepare(NamedTuple):
    """'P': PREPARE TRANSACTION of the transaction opened by Begin Prepare."""

    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_timestamp: int
    xid: int
    gid: str


class CommitPrepared(NamedTuple):
    """'K': COMMIT PREPARED."""

    flags: int
    commit_lsn: int
    end_lsn: int
    commit_timestamp: int
    xid: int
    gid: str


class RollbackPrepared(NamedTuple):
    """'r': ROLLBACK PREPARED."""

    flags: int
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_timestamp: int
    rollback_timestamp: int
    xid: int
    gid: str


class StreamPrepare(NamedTuple):
    """'p': PREPARE TRANSACTION of a streamed transaction."""

    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_timestamp: int
    xid: int
    gid: str


PgOutputMessage: TypeAlias = (
    Begin | Message | Commit | Origin | Relation | Type | Insert | Update | Delete | Truncate
    | StreamStart | StreamStop | StreamCommit | StreamAbort | BeginPrepare | Prepare
    | CommitPrepared | RollbackPrepared | StreamPrepare
)

MESSAGE_CLASSES: Final[tuple[type[PgOutputMessage], ...]] = (
    Begin, Message, Commit, Origin, Relation, Type, Insert, Update, Delete, Truncate,
    StreamStart, StreamStop, StreamCommit, StreamAbort, BeginPrepare, Prepare,
    CommitPrepared, RollbackPrepared, StreamPrepare,
)

# The message-type byte of each class (the first byte on the wire).
MESSAGE_BYTES: Final[dict[type[PgOutputMessage], bytes]] = {
    Begin: b"B", Message: b"M", Commit: b"C", Origin: b"O", Relation: b"R", Type: b"Y",
    Insert: b"I", Update: b"U", Delete: b"D", Truncate: b"T", StreamStart: b"S",
    StreamStop: b"E", StreamCommit: b"c", StreamAbort: b"A", BeginPrepare: b"b",
    Prepare: b"P", CommitPrepared: b"K", RollbackPrepared: b"r", StreamPrepare: b"p",
}


def _typed_eq(self: tuple[Any, ...], other: object) -> bool:
    return type(self) is type(other) and tuple.__eq__(self, other)


def _typed_ne(self: tuple[Any, ...], other: object) -> bool:
    return not _typed_eq(self, other)


def _typed_hash(self: tuple[Any, ...]) -> int:
    return hash((type(self).__name__, tuple.__hash__(self)))


for _cls in (*MESSAGE_CLASSES, RelationColumn):
    _cls.__eq__ = _typed_eq  # type: ignore[method-assign]
    _cls.__ne__ = _typed_ne  # type: ignore[assignment,method-assign]
    _cls.__hash__ = _typed_hash  # type: ignore[method-assign]
del _cls
