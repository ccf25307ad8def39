"""A table without a key re-published whole at one cut in the stream: the incremental snapshot of
a keyless table (a re-sync after DDL, `pgcdc snapshot`), which chunks cannot do (issue 46).

Why chunks cannot. A chunk's rows are fitted into the stream by dropping the keys the stream
changes meanwhile (`window`, `readonly`); without a key (REPLICA IDENTITY DEFAULT without a
primary key, NOTHING, or FULL: keyed by the whole row, so two equal rows are one key) nothing
tells a snapshot row from a streamed change of it. What remains is what the initial snapshot
does: publish the table whole, as of one point of the stream, starting with a truncate at that
point, so consumers (and the merge job's truncate cut) drop whatever the topic said before.

The cut. Its point has to be one the stream's order and the read's snapshot agree on. The
reader (`reader.ChunkReader`, a thread and connection of its own) runs, in one REPEATABLE READ
transaction:

1. ``LOCK TABLE t IN SHARE MODE`` (``lock_timeout`` `LOCK_TIMEOUT_S`: when the lock is not
   granted by then, the attempt is given up and made again later, `Busy`, `retry_delay`). SHARE
   conflicts with the ROW EXCLUSIVE lock every write of t takes (INSERT, UPDATE, DELETE, MERGE,
   COPY FROM, a subscription's apply), and with the locks of TRUNCATE and ALTER TABLE. So when
   it is granted, every transaction that wrote t has ended, and a transaction ends (its commit
   record written, then removed from the proc array) before it releases its locks: every one
   that committed is visible to a snapshot taken now. No other transaction can write t until
   this one ends. (LOCK takes no snapshot: the transaction's snapshot is the next statement's.)
2. ``pg_logical_emit_message(true, 'pgcdc.snapshot', '<run>:<n>:cut')`` (`CutMarker`), the
   transaction's first snapshot-taking statement, so its snapshot S is taken with the lock
   held; its WAL position m is the rows' position. Transactional: the stream decodes it with
   this transaction, at its commit.
3. ``COPY (SELECT <published columns> FROM t [WHERE <row filter>])``, each row encoded as an
   ``r`` event at ``(commit_lsn, txn_index) = (m, n)``, ``source.snapshot = "incremental"``,
   into a spool file (`Spool`: memory stays bounded whatever the table's size); the read is
   handed to the stream's thread (`PendingRead.result`), and only then
4. COMMIT, at c > m (its commit flushes the WAL, so the marker reaches the stream at once);
   the lock is released after it, and writers of t go on.

So for t, S sees exactly the transactions that committed before this one: one that wrote t
and committed before the lock was granted (commit record before m, visible: step 1), and none
that commits later (it could not write t before step 4: its commit record is after c). The
stream decodes transactions in commit order, so t's events before the marker's transaction
are exactly S's changes, those after it exactly the rest; transactions committed between m and
c did not write t.

The stream's thread (`driver`) meets the marker in that transaction (`watermark`), where the
read is always there (handed over before the commit that put the marker in the stream), and
publishes under that transaction's delivery ticket a truncate of t at ``(m, -1)`` (the initial
snapshot's `TRUNCATE_INDEX`), then every spooled row. In Kafka offset order (per partition;
the truncate goes to every partition, like any truncate) and in the merge job's order alike,
t's topic then reads: its events before m, the truncate (which removes them: the merge job's
truncate cut, `spark_jobs/rules/fold.truncate_cut`, keeps only what is after (m, -1)), the
table's rows as of m, the events after c. A table without a replica identity is merged keyed by
each change's position (docs/merge-internals.md, Key), so each row at (m, n) becomes one lake
row exactly once; FULL tables are keyed by the whole row as always. The rows show t as of every
commit before m, as a snapshot row at m claims (`spark_jobs/rules/cut_policy.snapshot_row`).
They carry the codec of the table's current description (`tables.published_table`, built from
the catalog after the DDL, as the stream's next Relation describes it): the same schema and
registry id as the stream's events after c.

Nothing is lost, nothing is left half. The truncate and the rows go out under the marker's
transaction's ticket: the slot's confirmed position passes that transaction only once Kafka
acknowledged every one of them. The request's progress moves past the table only then too
(`window.ChunkAcks`, one `SentChunk` for the whole table), so a producer killed before that
finds the request still running at this table and takes it again from step 1 (the replayed
marker is another run's: ignored); the new attempt's truncate at (m', -1) supersedes whatever
part of the first reached Kafka, so a half table is seen at most until the new attempt's rows
follow (with ``--exactly-once``, not at all by read_committed consumers: the first attempt's
Kafka transaction was aborted). A read that fails rolls back: its marker never reaches the
stream; one whose commit failed is given up, and its marker ignored should it arrive.

What it costs: writes of t wait while t is read (the COPY: about what the DDL's own rewrite
held an ACCESS EXCLUSIVE lock for; other tables, and the stream, go on); a request for the
SHARE lock that waits (behind a long transaction that wrote t) holds later writers of t back
for at most `LOCK_TIMEOUT_S`. The stream's thread produces the rows at once, like a
transaction of that size; the spool takes the table's encoded size on local disk. The role
needs the privilege LOCK ... SHARE MODE asks for (UPDATE, DELETE or TRUNCATE on t, or owning
it; MAINTAIN on PostgreSQL 17+).

Not possible read-only (`table_method`): a standby cannot take the lock nor write the marker,
and a request over Kafka promises no write on the source: such a request for a keyless table
fails with the reason. Neither for one partition of a table published through its root (a
partition attached later, `read_from`): a truncate would empty the root's whole topic.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Literal

from psycopg import sql

from connector.avro.table_codec import CopyEncoder

__all__ = ["LOCK_TIMEOUT_S", "Busy", "CutMarker", "Spool", "WholeRead", "WholeSpec",
           "lock_statement", "retry_delay", "table_method", "whole_copy_statement"]

LOCK_TIMEOUT_S = 2.0  # how long a SHARE lock request may hold the table's writers back
RETRY_S = 5.0  # when the lock was not granted: the next attempt, doubling up to RETRY_MAX_S
RETRY_MAX_S = 60.0

Method = Literal["chunks", "whole"]


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after `attempts` earlier ones in a row found the lock
    busy: `RETRY_S`, doubling up to `RETRY_MAX_S`, so a table written by a long transaction
    has its writers held back (`LOCK_TIMEOUT_S` per attempt) ever more rarely."""
    return min(RETRY_MAX_S, RETRY_S * 2.0 ** min(attempts, 16))


def table_method(*, replica_identity: str, has_key: bool, read_only: bool,
                 partition_of_root: bool) -> tuple[Method | None, str]:
    """How an incremental snapshot reads a table: in key-ordered chunks (a primary key or
    replica identity index), whole at one cut (no key, or keyed by the whole row), or not at
    all (None, with the reason the request fails with)."""
    if has_key and replica_identity != "f":
        return "chunks", ""
    what = "has REPLICA IDENTITY FULL (its events are keyed by the whole row)" \
        if replica_identity == "f" else "has no primary key (or replica identity index)"
    if partition_of_root:
        return None, (f"{what}, and is a partition published through its root: it can only be "
                      "re-published with the whole root (pgcdc snapshot --tables <root>)")
    if read_only:
        return None, (f"{what}: it can only be re-published whole, which needs a write on the "
                      "primary (a SHARE lock and a WAL marker); request it over the signal "
                      "table (--signal-channel table) on the primary")
    return "whole", ""


@dataclass(frozen=True)
class CutMarker:
    """The marker of a whole-table read, as the content of a transactional ``pgcdc.snapshot``
    message:
    ``<run>:<n>:cut`` (a chunk watermark's kinds are ``low`` and ``high``: `window.Watermark`
    reads this as no watermark, and this reads a watermark as no marker)."""

    run: str
    sequence: int

    def content(self) -> bytes:
        return f"{self.run}:{self.sequence}:cut".encode()

    @classmethod
    def parse(cls, content: bytes) -> CutMarker | None:
        try:
            run, sequence, kind = content.decode().rsplit(":", 2)
            if kind != "cut" or not run:
                return None
            return cls(run, int(sequence))
        except ValueError:  # also UnicodeDecodeError
            return None


class Busy(Exception):
    """The table's SHARE lock was not granted within `LOCK_TIMEOUT_S`: nothing was read or
    written; the driver tries again."""


_HEADER = struct.Struct(">ii")  # key length (-1: no key), value length


class Spool:
    """The encoded events of a whole-table read, in a temporary file (removed when closed):
    written once by the reader's thread, then read once by the stream's."""

    def __init__(self, directory: str | None = None) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="pgcdc-whole-", dir=directory)
        self.count = 0
        self.bytes = 0

    def add(self, key: bytes | None, value: bytes) -> None:
        self._file.write(_HEADER.pack(-1 if key is None else len(key), len(value)))
        if key is not None:
            self._file.write(key)
        self._file.write(value)
        self.count += 1
        self.bytes += len(value) + (len(key) if key is not None else 0)

    def events(self) -> Iterator[tuple[bytes | None, bytes]]:
        """The events in the order they were added (from the start, each call)."""
        file = self._file
        file.flush()
        file.seek(0)
        read = file.read
        for _ in range(self.count):
            key_len, value_len = _HEADER.unpack(read(_HEADER.size))
            key = read(key_len) if key_len >= 0 else None
            yield key, read(value_len)
        file.seek(0, os.SEEK_END)

    def close(self) -> None:
        self._file.close()


@dataclass(frozen=True)
class WholeSpec:
    """What a whole-table read runs, decided on the stream's thread: the lock (step 1), the
    COPY (step 3), the encoder of the table's codec, and the marker (step 2)."""

    lock: sql.Composed
    statement: sql.Composed
    encode: CopyEncoder
    marker: CutMarker


@dataclass
class WholeRead:
    """A whole-table read as handed to the stream's thread: the marker's position m (the rows'
    commit_lsn) and the spooled events."""

    position: int
    spool: Spool


def lock_statement(schema: str, table: str) -> sql.Composed:
    """Step 1: the SHARE lock (a partitioned table's partitions are locked with it)."""
    return sql.SQL("LOCK TABLE {} IN SHARE MODE").format(sql.Identifier(schema, table))


def whole_copy_statement(schema: str, table: str, columns: list[str],
                         row_filter: str | None = None) -> sql.Composed:
    """Step 3: every published column of every row the publication publishes (`row_filter`:
    its WHERE clause, PostgreSQL 15+), in no particular order."""
    where: sql.Composable = sql.SQL(" WHERE ({})").format(sql.SQL(row_filter)) \
        if row_filter else sql.SQL("")
    return sql.SQL("COPY (SELECT {} FROM {}{}) TO STDOUT").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns), sql.Identifier(schema, table),
        where)
