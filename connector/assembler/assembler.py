"""Decoded pgoutput messages in, complete committed transactions out.

    assembler = Assembler()
    for wal_lsn, message in stream:
        out = assembler.feed(wal_lsn, message)   # None, a Transaction or a LogicalMessage

What arrives, and how it is put together:

- Begin .. Commit: a plain transaction. Changes become `Change` objects as they arrive (one
  allocation and a list append); Begin's final LSN is the commit LSN.
- Stream Start(xid) .. Stream Stop blocks (protocol >= 2), interleaved between transactions and
  between the blocks of other streamed transactions: buffered per top-level xid until Stream
  Commit emits it or Stream Abort drops it.
- Stream Abort(xid, subxid != xid): a subtransaction rolled back. Inside stream blocks every row
  change carries the xid of the (sub)transaction that made it (pgoutput sends
  `change->txn->xid`), while a transactional Message carries the top-level xid. As PostgreSQL's
  own apply worker does (worker.c, stream_abort_internal), the buffer is cut back to the first
  change of that subtransaction: everything streamed after that point belongs to the
  subtransaction or to subtransactions nested in it, because a subtransaction stays open from
  its first change until its abort. A subtransaction with no streamed change is a no-op.
- Begin Prepare .. Prepare, and streamed transactions ending in Stream Prepare (two-phase):
  held until Commit Prepared emits them (with its commit LSN) or Rollback Prepared drops them.
  A Rollback Prepared of a transaction never seen is ignored: PostgreSQL sends it also for
  transactions whose PREPARE it did not decode.
- Relation, Type: update the relation cache at once (see relations.py).
- Message with the transactional flag: a change of its transaction; without: emitted at once as
  a `LogicalMessage`. A transactional one whose prefix has an expander (`expanders`) is not
  kept: the messages the expander returns for it (Type, Relation, row changes, with the
  message's xid) are fed in its place, at its WAL position, as if the stream had sent them
  (pgcdc's ``pgcdc.rows``: connector/replication/table_trigger.py).
- Origin: recorded on the transaction it arrives in.

Memory is bounded: a buffered transaction whose estimated size passes `spill_bytes` (or whose
change count passes `spill_changes`) moves its changes to an anonymous temporary file and from
then on keeps at most one chunk in memory; its `Transaction.changes` then reads them back in
order when iterated. Spill files are freed on abort, on `Transaction.close()` (or when the
transaction is garbage collected) and on `Assembler.close()`.

`oldest_open_lsn` is the smallest WAL LSN of any transaction still buffered: the producer must not
confirm a flush LSN past it, or a restart would not send that transaction again.

Anything that breaks the protocol raises `DecodeError` with the message's LSN; the assembler's
state is then unspecified and it should be closed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from weakref import WeakSet

from connector.errors import DecodeError
from connector.pgoutput.lsn import lsn_to_str
from connector.pgoutput.messages import (
    MESSAGE_TRANSACTIONAL,
    UNCHANGED_TOAST,
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    Origin,
    PgOutputMessage,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    Type,
    Update,
)

from .relations import RelationCache
from .spill import SpillEntry, SpillFile
from .transaction import Change, ChangeMessage, Changes, LogicalMessage, Output, Transaction

DEFAULT_SPILL_BYTES: Final = 64 * 1024 * 1024
_MAX_CHUNK_BYTES: Final = 4 * 1024 * 1024  # in-memory tail of a spilled transaction
_MAX_CHUNK_ENTRIES: Final = 4096
# Plain transactions estimate their size from every 16th change (the hot path stays an append).
_SAMPLE_MASK: Final = 15
_SAMPLE: Final = _SAMPLE_MASK + 1

# What an expander may stand a message for.
_EXPANDED: Final = (Type, Relation, Insert, Update, Delete, Truncate)

# Transaction kinds.
_PLAIN: Final = 0  # Begin .. Commit
_STREAMED: Final = 1  # Stream Start/Stop blocks
_PREPARING: Final = 2  # Begin Prepare .. Prepare
_KIND_NAMES: Final = {_PLAIN: "transaction", _STREAMED: "streamed transaction",
                      _PREPARING: "prepared transaction"}

# Builds a Change from a tuple of its fields without NamedTuple's Python-level __new__ (about
# half the cost on the hot path).
_new_change: Final = tuple.__new__

# A buffered entry: (relation or None for a Message, message, wal_lsn).
_Entry = tuple[Relation | None, ChangeMessage, int]
#: A transactional message -> the messages fed in its place (ValueError: it is unreadable).
Expander = Callable[[Message], Sequence[PgOutputMessage]]


def _tuple_size(values: TupleData | None) -> int:
    if values is None:
        return 0
    size = 56 + 8 * len(values)
    for value in values:
        if value is not None and value is not UNCHANGED_TOAST:
            size += 40 + len(value)  # type: ignore[arg-type]
    return size


def estimate_size(message: ChangeMessage) -> int:
    """Rough bytes a buffered message takes in memory (objects included)."""
    cls = type(message)
    if cls is Insert:
        return 200 + _tuple_size(message.new)  # type: ignore[union-attr]
    if cls is Update:
        return 220 + _tuple_size(message.new) + _tuple_size(message.old)  # type: ignore[union-attr]
    if cls is Delete:
        return 200 + _tuple_size(message.old)  # type: ignore[union-attr]
    if cls is Message:
        return 200 + len(message.prefix) + len(message.content)  # type: ignore[union-attr]
    return 200  # Truncate


class _Txn:
    """A transaction being buffered (internal, mutable)."""

    __slots__ = (
        "kind", "xid", "first_wal_lsn", "commit_lsn", "commit_timestamp", "origin",
        "direct", "changes", "count", "est", "spill", "rel_index", "rel_table",
        "sub_first", "last_sub", "gid", "prepare_lsn", "prepare_timestamp",
    )

    def __init__(self, kind: int, xid: int, first_wal_lsn: int, commit_lsn: int = 0,
                 commit_timestamp: int = 0) -> None:
        self.kind = kind
        self.xid = xid
        self.first_wal_lsn = first_wal_lsn
        self.commit_lsn = commit_lsn  # plain: Begin's final LSN; else set at commit
        self.commit_timestamp = commit_timestamp
        self.origin: Origin | None = None
        # Plain transactions build `Change`s as they arrive (direct); the others, whose commit
        # LSN is not known yet, buffer entries and build the changes at commit.
        self.direct = kind == _PLAIN
        self.changes: list[Any] = []  # Change (direct) or _Entry; once spilled: the tail
        self.count = 0  # events so far (= the next position)
        self.est = 0  # estimated bytes of `changes`
        self.spill: SpillFile | None = None
        self.rel_index: dict[int, int] = {}  # id(Relation) -> index into rel_table (spilled)
        self.rel_table: list[Relation] = []
        self.sub_first: dict[int, int] = {}  # subxid -> position of its first change
        self.last_sub = -1
        self.gid: str | None = None
        self.prepare_lsn: int | None = None
        self.prepare_timestamp: int | None = None

    def describe(self) -> str:
        return f"{_KIND_NAMES[self.kind]} {self.xid}"


class Assembler:
    """Turns a pgoutput message stream into committed transactions (see the module doc).

    One per replication stream (a new one after a reconnect: PostgreSQL sends everything again
    from the confirmed LSN, Relations included). Not thread-safe.
    """

    def __init__(self, *, spill_bytes: int = DEFAULT_SPILL_BYTES,
                 spill_changes: int | None = None,
                 spill_dir: str | Path | None = None,
                 expanders: Mapping[str, Expander] | None = None) -> None:
        """spill_bytes / spill_changes: a buffered transaction estimated larger than this many
        bytes, or with more than this many changes, moves its changes to a temporary file in
        spill_dir (default: the system temp directory). `expanders`: prefix -> what a
        transactional message of that prefix stands for (module docstring)."""
        if spill_bytes < 0 or (spill_changes is not None and spill_changes < 0):
            raise ValueError("spill limits must not be negative")
        self._spill_bytes = spill_bytes
        self._spill_changes = spill_changes if spill_changes is not None else 1 << 62
        self._chunk_bytes = max(1, min(spill_bytes, _MAX_CHUNK_BYTES))
        self._chunk_entries = max(1, min(self._spill_changes, _MAX_CHUNK_ENTRIES))
        self._spill_dir = spill_dir
        self._expanders: dict[str, Expander] = dict(expanders or {})
        self._cache = RelationCache()
        self._relations = self._cache.by_id  # the hot path reads the dict directly
        self._open: _Txn | None = None  # Begin/Begin Prepare .. or the current stream block
        self._streams: dict[int, _Txn] = {}  # streamed, not yet committed/prepared/aborted
        self._prepared: dict[int, _Txn] = {}  # prepared, awaiting Commit/Rollback Prepared
        self._spills: WeakSet[SpillFile] = WeakSet()
        handlers: dict[type, Callable[[int, Any], Output | None]] = {
            Begin: self._begin, Commit: self._commit, Origin: self._origin,
            Relation: self._relation, Type: self._type, Insert: self._row, Update: self._row,
            Delete: self._row, Truncate: self._truncate, Message: self._message,
            StreamStart: self._stream_start, StreamStop: self._stream_stop,
            StreamCommit: self._stream_commit, StreamAbort: self._stream_abort,
            StreamPrepare: self._stream_prepare, BeginPrepare: self._begin_prepare,
            Prepare: self._prepare, CommitPrepared: self._commit_prepared,
            RollbackPrepared: self._rollback_prepared,
        }
        self._handlers = handlers

    # --- public API ----------------------------------------------------------------------------

    def feed(self, wal_lsn: int, message: PgOutputMessage) -> Output | None:
        """Take one decoded message; return the Transaction or LogicalMessage it completes."""
        cls = type(message)
        if cls is Insert or cls is Update or cls is Delete:
            # `_row`'s hot path inlined (a row change of an open plain transaction): one call
            # less per change. Anything else goes through `_row`.
            txn = self._open
            if txn is not None and txn.direct and message.xid is None:  # type: ignore[union-attr]
                rel = self._relations.get(message.relation_id)  # type: ignore[union-attr]
                if rel is not None:
                    pos = txn.count
                    txn.count = pos + 1
                    txn.changes.append(_new_change(Change, (rel, message, wal_lsn, pos, txn.xid,
                                                            txn.commit_lsn,
                                                            txn.commit_timestamp)))
                    if pos & _SAMPLE_MASK == 0 or pos >= self._spill_changes:
                        self._check_plain(txn, message, pos)  # type: ignore[arg-type]
                    return None
            self._row(wal_lsn, message)  # type: ignore[arg-type]
            return None
        handler = self._handlers.get(cls)
        if handler is None:
            raise DecodeError(f"not a pgoutput message: {type(message).__name__}",
                              lsn=lsn_to_str(wal_lsn))
        return handler(wal_lsn, message)

    def feed_all(self, messages: Iterable[tuple[int, PgOutputMessage]]) -> Iterator[Output]:
        """feed() each (wal_lsn, message) pair; yield the outputs."""
        feed = self.feed
        for wal_lsn, message in messages:
            out = feed(wal_lsn, message)
            if out is not None:
                yield out

    @property
    def relations(self) -> Mapping[int, Relation]:
        """Read-only mapping relation id -> the latest Relation."""
        return self._cache.relations

    @property
    def types(self) -> Mapping[int, Type]:
        """Read-only mapping type OID -> the latest Type message."""
        return self._cache.types

    @property
    def oldest_open_lsn(self) -> int | None:
        """Smallest first WAL LSN of any transaction still buffered (open plain or prepare
        block, open streamed, prepared and not yet committed), or None when nothing is.
        Never confirm a flush LSN greater than this."""
        lowest: int | None = None
        if self._open is not None:
            lowest = self._open.first_wal_lsn
        for group in (self._streams, self._prepared):
            for txn in group.values():
                if lowest is None or txn.first_wal_lsn < lowest:
                    lowest = txn.first_wal_lsn
        return lowest

    @property
    def pending_xids(self) -> tuple[int, ...]:
        """Top-level xids buffered: open, streamed in progress, prepared."""
        xids = [*self._streams, *self._prepared]
        if self._open is not None and self._open.kind != _STREAMED:
            xids.append(self._open.xid)
        return tuple(xids)

    @property
    def prepared_gids(self) -> tuple[str, ...]:
        """GIDs of the prepared transactions waiting for COMMIT/ROLLBACK PREPARED."""
        return tuple(t.gid or "" for t in self._prepared.values())

    @property
    def in_transaction(self) -> bool:
        """Inside Begin .. Commit, Begin Prepare .. Prepare or a stream block."""
        return self._open is not None

    @property
    def open_spill_files(self) -> int:
        """Spill files of this assembler not yet freed (buffered or held by a Transaction)."""
        return sum(1 for spill in self._spills if not spill.closed)

    def close(self) -> None:
        """Drop everything buffered and free every spill file this assembler created,
        including those of emitted transactions not yet closed."""
        self._open = None
        self._streams.clear()
        self._prepared.clear()
        for spill in list(self._spills):
            spill.close()

    def __enter__(self) -> Assembler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- errors --------------------------------------------------------------------------------

    @staticmethod
    def _error(reason: str, wal_lsn: int) -> DecodeError:
        return DecodeError(reason, lsn=lsn_to_str(wal_lsn))

    def _expect_idle(self, what: str, wal_lsn: int) -> None:
        if self._open is not None:
            where = ("inside a stream block of" if self._open.kind == _STREAMED
                     else "while open:")
            raise self._error(f"{what} {where} {self._open.describe()}", wal_lsn)

    # --- plain transactions --------------------------------------------------------------------

    def _begin(self, wal_lsn: int, msg: Begin) -> None:
        self._expect_idle(f"Begin of transaction {msg.xid}", wal_lsn)
        self._open = _Txn(_PLAIN, msg.xid, wal_lsn, msg.final_lsn, msg.commit_timestamp)

    def _commit(self, wal_lsn: int, msg: Commit) -> Transaction:
        txn = self._open
        if txn is None or txn.kind != _PLAIN:
            raise self._error("Commit without Begin" if txn is None
                              else f"Commit inside {txn.describe()}", wal_lsn)
        if msg.commit_lsn != txn.commit_lsn:
            raise self._error(f"Commit LSN {lsn_to_str(msg.commit_lsn)} differs from the final "
                              f"LSN {lsn_to_str(txn.commit_lsn)} of Begin of transaction "
                              f"{txn.xid}", wal_lsn)
        self._open = None
        return self._emit(txn, msg.commit_lsn, msg.end_lsn, msg.commit_timestamp)

    def _origin(self, wal_lsn: int, msg: Origin) -> None:
        if self._open is None:
            raise self._error("Origin outside a transaction", wal_lsn)
        self._open.origin = msg

    # --- relation cache ------------------------------------------------------------------------

    def _relation(self, wal_lsn: int, msg: Relation) -> None:
        self._cache.add_relation(msg)

    def _type(self, wal_lsn: int, msg: Type) -> None:
        self._cache.add_type(msg)

    # --- changes -------------------------------------------------------------------------------

    def _row(self, wal_lsn: int, msg: Insert | Update | Delete) -> None:
        txn = self._open
        if txn is not None and txn.direct and msg.xid is None:  # the hot path
            rel = self._relations.get(msg.relation_id)
            if rel is not None:
                pos = txn.count
                txn.count = pos + 1
                txn.changes.append(_new_change(Change, (rel, msg, wal_lsn, pos, txn.xid,
                                                        txn.commit_lsn, txn.commit_timestamp)))
                if pos & _SAMPLE_MASK == 0 or pos >= self._spill_changes:
                    self._check_plain(txn, msg, pos)
                return None
        txn = self._change_target(msg, wal_lsn)
        rel = self._relations.get(msg.relation_id)
        if rel is None:
            raise self._error(f"{type(msg).__name__} for unknown relation id "
                              f"{msg.relation_id} (no Relation message before it)", wal_lsn)
        self._add(txn, rel, msg, wal_lsn)
        return None

    def _truncate(self, wal_lsn: int, msg: Truncate) -> None:
        txn = self._change_target(msg, wal_lsn)
        rels = []
        for relation_id in msg.relation_ids:
            rel = self._relations.get(relation_id)
            if rel is None:
                raise self._error(f"Truncate of unknown relation id {relation_id} (no Relation "
                                  f"message before it)", wal_lsn)
            rels.append(rel)
        for rel in rels:  # one event per truncated table
            self._add(txn, rel, msg, wal_lsn)

    def _message(self, wal_lsn: int, msg: Message) -> LogicalMessage | None:
        if not msg.flags & MESSAGE_TRANSACTIONAL:
            return LogicalMessage(msg, wal_lsn)
        txn = self._change_target(msg, wal_lsn)
        expand = self._expanders.get(msg.prefix)
        if expand is None:
            self._add(txn, None, msg, wal_lsn)
            return None
        try:
            messages = expand(msg)
        except ValueError as exc:
            raise self._error(str(exc), wal_lsn) from None
        for message in messages:
            if isinstance(message, _EXPANDED):
                self.feed(wal_lsn, message)
            else:
                raise self._error(f"the {msg.prefix} message stands for a "
                                  f"{type(message).__name__}, not a change", wal_lsn)
        return None

    def _change_target(self, msg: ChangeMessage, wal_lsn: int) -> _Txn:
        """The transaction a change or transactional message belongs to; checks its xid."""
        txn = self._open
        name = type(msg).__name__
        if txn is None:
            raise self._error(f"{name} outside a transaction", wal_lsn)
        if txn.kind == _STREAMED:
            if msg.xid is None:
                raise self._error(f"{name} inside a stream block without an xid (decode "
                                  "stream blocks with streaming=True)", wal_lsn)
        elif msg.xid is not None:
            raise self._error(f"{name} with an xid outside a stream block (in "
                              f"{txn.describe()})", wal_lsn)
        return txn

    def _add(self, txn: _Txn, rel: Relation | None, msg: ChangeMessage, wal_lsn: int) -> None:
        """Append one event to a transaction (every path but the plain hot path)."""
        pos = txn.count
        if txn.kind == _STREAMED:
            sub = msg.xid
            if sub != txn.last_sub and sub is not None:
                txn.last_sub = sub
                if sub != txn.xid and sub not in txn.sub_first:
                    txn.sub_first[sub] = pos
        txn.count = pos + 1
        if txn.direct:
            txn.changes.append(_new_change(Change, (rel, msg, wal_lsn, pos, txn.xid,
                                                    txn.commit_lsn, txn.commit_timestamp)))
            if pos & _SAMPLE_MASK == 0 or pos >= self._spill_changes:
                self._check_plain(txn, msg, pos)
            return
        txn.changes.append((rel, msg, wal_lsn))
        txn.est += estimate_size(msg)
        if txn.spill is None:
            if txn.est > self._spill_bytes or txn.count > self._spill_changes:
                self._spill(txn)
        elif txn.est >= self._chunk_bytes or len(txn.changes) >= self._chunk_entries:
            self._flush(txn)

    # --- spilling ------------------------------------------------------------------------------

    def _check_plain(self, txn: _Txn, msg: ChangeMessage, pos: int) -> None:
        """A plain transaction's size, estimated from every 16th change; spill when too big."""
        if pos & _SAMPLE_MASK == 0:
            txn.est += estimate_size(msg) * _SAMPLE
        if txn.est > self._spill_bytes or txn.count > self._spill_changes:
            self._spill(txn)

    def _spill(self, txn: _Txn) -> None:
        """Move a transaction's changes to a new spill file; from now on it buffers entries."""
        spill = SpillFile(self._spill_dir)
        self._spills.add(spill)
        txn.spill = spill
        if txn.direct:
            txn.changes = [(c.relation, c.message, c.wal_lsn) for c in txn.changes]
            txn.direct = False
        self._flush(txn)

    def _flush(self, txn: _Txn) -> None:
        """Write the in-memory entries of a spilled transaction to its file, in chunks."""
        assert txn.spill is not None
        index = txn.rel_index
        table = txn.rel_table
        batch: list[SpillEntry] = []
        for rel, msg, wal_lsn in txn.changes:
            if rel is None:
                ri = -1
            else:
                ri = index.get(id(rel), -1)
                if ri < 0:
                    ri = index[id(rel)] = len(table)
                    table.append(rel)  # keeps rel alive, so its id stays unique
            batch.append((ri, msg, wal_lsn))
            if len(batch) >= self._chunk_entries:
                txn.spill.append(batch)
                batch = []
        txn.spill.append(batch)
        txn.changes = []
        txn.est = 0

    def _discard(self, txn: _Txn) -> None:
        txn.changes = []
        if txn.spill is not None:
            txn.spill.close()
            txn.spill = None

    # --- emitting ------------------------------------------------------------------------------

    def _emit(self, txn: _Txn, commit_lsn: int, end_lsn: int, commit_timestamp: int
              ) -> Transaction:
        xid = txn.xid
        if txn.spill is not None:
            self._flush(txn)
            changes = Changes([], txn.spill, txn.rel_table, txn.count, xid, commit_lsn,
                              commit_timestamp)
        elif txn.direct:
            changes = Changes(txn.changes)
        else:
            changes = Changes([_new_change(Change, (rel, msg, wal_lsn, pos, xid, commit_lsn,
                                                    commit_timestamp))
                               for pos, (rel, msg, wal_lsn) in enumerate(txn.changes)])
        txn.changes = []
        txn.spill = None
        return Transaction(xid, commit_lsn, end_lsn, commit_timestamp, changes,
                           txn.first_wal_lsn, txn.origin, txn.kind == _STREAMED, txn.gid,
                           txn.prepare_lsn, txn.prepare_timestamp)

    # --- streamed transactions -----------------------------------------------------------------

    def _stream_start(self, wal_lsn: int, msg: StreamStart) -> None:
        self._expect_idle(f"Stream Start of transaction {msg.xid}", wal_lsn)
        txn = self._streams.get(msg.xid)
        if msg.first_segment:
            if txn is not None:
                raise self._error(f"Stream Start marks the first segment of streamed "
                                  f"transaction {msg.xid}, which is already buffered", wal_lsn)
            if msg.xid in self._prepared:
                raise self._error(f"Stream Start of transaction {msg.xid}, which is already "
                                  "prepared", wal_lsn)
            txn = self._streams[msg.xid] = _Txn(_STREAMED, msg.xid, wal_lsn)
        elif txn is None:
            raise self._error(f"Stream Start continues streamed transaction {msg.xid}, whose "
                              "first segment never came", wal_lsn)
        self._open = txn

    def _stream_stop(self, wal_lsn: int, msg: StreamStop) -> None:
        txn = self._open
        if txn is None or txn.kind != _STREAMED:
            raise self._error("Stream Stop without Stream Start" if txn is None
                              else f"Stream Stop inside {txn.describe()}", wal_lsn)
        self._open = None

    def _streamed(self, xid: int, what: str, wal_lsn: int) -> _Txn:
        self._expect_idle(f"{what} of transaction {xid}", wal_lsn)
        txn = self._streams.get(xid)
        if txn is None:
            state = " (it is prepared)" if xid in self._prepared else ""
            raise self._error(f"{what} for unknown streamed transaction {xid}{state}", wal_lsn)
        return txn

    def _stream_commit(self, wal_lsn: int, msg: StreamCommit) -> Transaction:
        txn = self._streamed(msg.xid, "Stream Commit", wal_lsn)
        del self._streams[msg.xid]
        return self._emit(txn, msg.commit_lsn, msg.end_lsn, msg.commit_timestamp)

    def _stream_abort(self, wal_lsn: int, msg: StreamAbort) -> None:
        txn = self._streamed(msg.xid, "Stream Abort", wal_lsn)
        if msg.subxid == msg.xid:
            del self._streams[msg.xid]
            self._discard(txn)
            return
        pos = txn.sub_first.get(msg.subxid)
        if pos is None:
            return  # no change of that subtransaction was streamed
        txn.sub_first = {x: p for x, p in txn.sub_first.items() if p < pos}
        txn.last_sub = -1
        dropped = txn.count - pos
        txn.count = pos
        if txn.spill is None or pos >= txn.spill.count:
            keep = len(txn.changes) - dropped
            txn.est = txn.est * keep // max(1, len(txn.changes))
            del txn.changes[keep:]
        else:
            table = txn.rel_table  # the kept head of the cut batch comes back into memory
            txn.changes = [(table[ri] if ri >= 0 else None, m, w)
                           for ri, m, w in txn.spill.truncate(pos)]
            txn.est = sum(estimate_size(m) for _, m, _ in txn.changes)

    def _stream_prepare(self, wal_lsn: int, msg: StreamPrepare) -> None:
        txn = self._streamed(msg.xid, "Stream Prepare", wal_lsn)
        del self._streams[msg.xid]
        self._hold(txn, msg.gid, msg.prepare_lsn, msg.prepare_timestamp)

    # --- two-phase -----------------------------------------------------------------------------

    def _hold(self, txn: _Txn, gid: str, prepare_lsn: int, ts: int) -> None:
        """Keep a prepared transaction until COMMIT/ROLLBACK PREPARED."""
        txn.gid = gid
        txn.prepare_lsn = prepare_lsn
        txn.prepare_timestamp = ts
        self._prepared[txn.xid] = txn

    def _begin_prepare(self, wal_lsn: int, msg: BeginPrepare) -> None:
        self._expect_idle(f"Begin Prepare of transaction {msg.xid}", wal_lsn)
        if msg.xid in self._prepared or msg.xid in self._streams:
            raise self._error(f"Begin Prepare of transaction {msg.xid}, which is already "
                              "buffered", wal_lsn)
        txn = self._open = _Txn(_PREPARING, msg.xid, wal_lsn)
        txn.gid = msg.gid

    def _prepare(self, wal_lsn: int, msg: Prepare) -> None:
        txn = self._open
        if txn is None or txn.kind != _PREPARING:
            raise self._error("Prepare without Begin Prepare" if txn is None
                              else f"Prepare inside {txn.describe()}", wal_lsn)
        if txn.xid != msg.xid or txn.gid != msg.gid:
            raise self._error(f"Prepare of transaction {msg.xid} ({msg.gid!r}) ends "
                              f"{txn.describe()} ({txn.gid!r})", wal_lsn)
        self._open = None
        self._hold(txn, msg.gid, msg.prepare_lsn, msg.prepare_timestamp)

    def _commit_prepared(self, wal_lsn: int, msg: CommitPrepared) -> Transaction:
        self._expect_idle(f"Commit Prepared of transaction {msg.xid}", wal_lsn)
        txn = self._prepared.pop(msg.xid, None)
        if txn is None:
            raise self._error(f"Commit Prepared of transaction {msg.xid} ({msg.gid!r}), which "
                              "was not prepared in this stream: its changes are unknown",
                              wal_lsn)
        if txn.gid != msg.gid:
            self._prepared[msg.xid] = txn
            raise self._error(f"Commit Prepared of transaction {msg.xid} names GID {msg.gid!r},"
                              f" it was prepared as {txn.gid!r}", wal_lsn)
        return self._emit(txn, msg.commit_lsn, msg.end_lsn, msg.commit_timestamp)

    def _rollback_prepared(self, wal_lsn: int, msg: RollbackPrepared) -> None:
        self._expect_idle(f"Rollback Prepared of transaction {msg.xid}", wal_lsn)
        txn = self._prepared.pop(msg.xid, None)
        if txn is not None:
            self._discard(txn)
