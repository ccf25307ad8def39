"""Builders of pgoutput message sequences for the assembler unit tests.

`Script` hands out increasing WAL LSNs and records (wal_lsn, message) pairs the way a
walsender would send them; the message classes are the real ones from connector.pgoutput.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from connector.assembler import Assembler, Change, Output, Transaction
from connector.pgoutput import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    PgOutputMessage,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    Update,
)

TS = 800_000_000_000_000


def relation(relation_id: int, name: str = "t", columns: tuple[str, ...] = ("id", "v"),
             xid: int | None = None) -> Relation:
    cols = tuple(RelationColumn(1 if i == 0 else 0, c, 23 if i == 0 else 25, -1)
                 for i, c in enumerate(columns))
    return Relation(xid, relation_id, "public", name, "d", cols)


def ins(relation_id: int, *values: str | None, xid: int | None = None) -> Insert:
    return Insert(xid, relation_id, tuple(values))


def upd(relation_id: int, *values: str | None, xid: int | None = None) -> Update:
    return Update(xid, relation_id, None, None, tuple(values))


def dele(relation_id: int, key: str, xid: int | None = None) -> Delete:
    return Delete(xid, relation_id, "K", (key, None))


def tmsg(prefix: str, content: bytes = b"x", xid: int | None = None, lsn: int = 1) -> Message:
    return Message(xid, 1, lsn, prefix, content)


def ntmsg(prefix: str, content: bytes = b"x", lsn: int = 1) -> Message:
    return Message(None, 0, lsn, prefix, content)


class Script:
    """A message sequence with increasing WAL LSNs."""

    def __init__(self, start: int = 0x0100_0000) -> None:
        self.lsn = start
        self.pairs: list[tuple[int, PgOutputMessage]] = []

    def add(self, *messages: PgOutputMessage) -> Script:
        for msg in messages:
            self.lsn += 0x40
            self.pairs.append((self.lsn, msg))
        return self

    def next_lsn(self) -> int:
        return self.lsn + 0x40

    # plain
    def begin(self, xid: int, final_lsn: int, ts: int = TS) -> Script:
        return self.add(Begin(final_lsn, ts, xid))

    def commit(self, final_lsn: int, ts: int = TS) -> Script:
        return self.add(Commit(0, final_lsn, final_lsn + 0x30, ts))

    def plain(self, xid: int, *changes: PgOutputMessage, final_lsn: int | None = None
              ) -> Script:
        final = final_lsn if final_lsn is not None else 0x7000_0000 + xid * 0x100
        return self.begin(xid, final).add(*changes).commit(final)

    # streamed
    def block(self, xid: int, *changes: PgOutputMessage, first: bool = False) -> Script:
        return self.add(StreamStart(xid, first), *changes, StreamStop())

    def stream_commit(self, xid: int, commit_lsn: int | None = None, ts: int = TS) -> Script:
        lsn = commit_lsn if commit_lsn is not None else 0x7000_0000 + xid * 0x100
        return self.add(StreamCommit(xid, 0, lsn, lsn + 0x30, ts))

    def stream_abort(self, xid: int, subxid: int) -> Script:
        return self.add(StreamAbort(xid, subxid))

    def stream_prepare(self, xid: int, gid: str, prepare_lsn: int = 0x6000_0000) -> Script:
        return self.add(StreamPrepare(0, prepare_lsn, prepare_lsn + 0x30, TS, xid, gid))

    # two-phase
    def begin_prepare(self, xid: int, gid: str, prepare_lsn: int = 0x6000_0000) -> Script:
        return self.add(BeginPrepare(prepare_lsn, prepare_lsn + 0x30, TS, xid, gid))

    def prepare(self, xid: int, gid: str, prepare_lsn: int = 0x6000_0000) -> Script:
        return self.add(Prepare(0, prepare_lsn, prepare_lsn + 0x30, TS, xid, gid))

    def commit_prepared(self, xid: int, gid: str, commit_lsn: int, ts: int = TS + 5) -> Script:
        return self.add(CommitPrepared(0, commit_lsn, commit_lsn + 0x30, ts, xid, gid))

    def rollback_prepared(self, xid: int, gid: str, prepare_end_lsn: int = 0x6000_0030
                          ) -> Script:
        return self.add(RollbackPrepared(0, prepare_end_lsn, prepare_end_lsn + 0x100, TS,
                                         TS + 5, xid, gid))

    def truncate(self, *relation_ids: int, xid: int | None = None, options: int = 0
                 ) -> Script:
        return self.add(Truncate(xid, options, tuple(relation_ids)))


def run(pairs: Iterable[tuple[int, PgOutputMessage]], assembler: Assembler | None = None
        ) -> list[Output]:
    asm = assembler if assembler is not None else Assembler()
    return list(asm.feed_all(pairs))


def transactions(outputs: Iterable[Output]) -> list[Transaction]:
    return [o for o in outputs if isinstance(o, Transaction)]


def summary(txn: Transaction) -> list[tuple[Any, ...]]:
    """A transaction's changes as plain tuples (relation id, message, wal_lsn, position, ...)."""
    return [(c.relation.relation_id if c.relation is not None else None, *c[1:])
            for c in txn.changes]


def change_values(txn: Transaction) -> list[Any]:
    """First column of each row change's new (or old) tuple; prefix of messages."""
    out: list[Any] = []
    for c in txn.changes:
        out.append(_first_value(c))
    return out


def _first_value(c: Change) -> Any:
    msg = c.message
    if isinstance(msg, Message):
        return msg.prefix
    if isinstance(msg, Insert | Update):
        return msg.new[0]
    if isinstance(msg, Delete):
        return msg.old[0]
    return "truncate"


def open_fds_under(directory: str | Path) -> list[str]:
    """Open file descriptors of this process whose target lies in `directory` (Linux)."""
    prefix = str(Path(directory).resolve())
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            found.append(target)
    return found
