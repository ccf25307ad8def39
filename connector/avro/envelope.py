"""The change-event Envelope (connector/avro/schemas/README.md) around Value rows.

The Envelope of a table version is the same for every event but for a few longs, so it is
written from pre-encoded pieces around the rows' fields: the same bytes as fastavro writing the
whole Envelope (tests/unit/avro/test_avro_envelope_bytes.py), at a fraction of the cost. The C
twin (`connector._native.EnvelopeFrame`) writes it when built; it declines (None) what it does
not handle and `EnvelopeFrame.write_fields` then writes it here.
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from fastavro import schemaless_writer

from connector.speedups import native

from .binary import (
    BRANCH_1,
    NULL,
    OP_BYTES,
    SNAPSHOT_BYTES,
    RowEncoder,
    avro_long,
    avro_string,
    optional_long,
    unparsed_map,
)
from .wire import header

__all__ = ["OPS", "EnvelopeFrame", "SourceInfo", "TransactionBlock"]

#: The Envelope's ops: create, update, delete, read (snapshot), truncate.
OPS: Final = frozenset("cudrt")


class SourceInfo(NamedTuple):
    """The per-event fields of the Envelope's ``source`` block (avro/schemas/source.avsc)."""

    commit_lsn: int  # LSN of the commit record (snapshot: the consistent point)
    txn_index: int  # 0-based position of the change in its transaction (snapshot: row number)
    ts_ms: int  # commit time, ms since the epoch
    xid: int | None = None  # txId
    lsn: int | None = None  # LSN of the change itself
    snapshot: str = "false"  # "true", "last" or "false"
    xmin: int | None = None
    sequence: str | None = None


class TransactionBlock(NamedTuple):
    """The Envelope's ``transaction`` block (connector/avro/schemas/transaction_block.avsc)."""

    id: str  # "<xid>:<commit_lsn>"
    total_order: int  # 1-based among all events of the transaction
    data_collection_order: int  # 1-based among its events of this table


class EnvelopeFrame:
    """Writes framed Envelopes of one table version: the `Value` rows by the hand row encoder
    (or fastavro), the Source/op/ts_ms/transaction/unchanged_toast/unparsed fields from
    pre-encoded constants. `native`: the C twin, or None (extension not built or disabled)."""

    __slots__ = ("_header", "_value", "_encode_row", "_source_head", "_db", "_schema_table",
                 "_commit_key", "_commit_bytes", "_txn_id", "_txn_id_bytes", "_now_ms",
                 "_now_bytes", "native")

    def __init__(self, value_record: Any, encode_row: RowEncoder | None, schema_id: int,
                 constants: Mapping[str, str]) -> None:
        self._header = header(schema_id)
        self._value = value_record  # parsed Value record schema
        self._encode_row = encode_row  # None: fastavro writes the rows
        self._source_head = (avro_string(constants["version"])
                             + avro_string(constants["connector"])
                             + avro_string(constants["name"]))
        self._db = avro_string(constants["db"])
        self._schema_table = avro_string(constants["schema"]) + avro_string(constants["table"])
        # per-transaction values repeat from event to event: encoded once
        self._commit_key: tuple[int, int | None, int] | None = None
        self._commit_bytes = (b"", b"", b"")
        self._txn_id: str | None = None
        self._txn_id_bytes = b""
        self._now_ms = -1
        self._now_bytes = b""
        self.native = None if native is None else native.EnvelopeFrame(
            self._header, self._source_head, self._db, self._schema_table)

    def write(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
              toast: list[str], source: SourceInfo, ts_ms: int | None,
              transaction: TransactionBlock | None,
              unparsed: dict[str, str] | None = None) -> bytes:
        return self.write_fields(op, self._fields(before), self._fields(after), toast, source,
                                 ts_ms, transaction, unparsed)

    def _fields(self, row: dict[str, Any] | None) -> bytes | None:
        """A Value row's Avro fields ({field: None | (branch, datum)} in)."""
        if row is None:
            return None
        if self._encode_row is not None:
            return self._encode_row(row)
        buf = io.BytesIO()
        schemaless_writer(buf, self._value, row)
        return buf.getvalue()

    def write_fields(self, op: str, before: bytes | None, after: bytes | None,
                     toast: list[str], source: SourceInfo, ts_ms: int | None,
                     transaction: TransactionBlock | None,
                     unparsed: dict[str, str] | None = None) -> bytes:
        """The framed Envelope around Value rows already encoded (their fields' bytes);
        `unparsed`: {name: exact text} of the values that fell back to null (None: none)."""
        if self.native is not None:
            framed: bytes | None = self.native.write(op, before, after, toast, source, ts_ms,
                                                      transaction, unparsed)
            if framed is not None:
                return framed
        buf = io.BytesIO()
        buf.write(self._header)
        for fields in (before, after):
            if fields is None:
                buf.write(NULL)
            else:
                buf.write(BRANCH_1)
                buf.write(fields)
        commit_key = (source.ts_ms, source.xid, source.commit_lsn)
        if commit_key != self._commit_key:
            self._commit_bytes = (avro_long(source.ts_ms), optional_long(source.xid),
                                  avro_long(source.commit_lsn))
            self._commit_key = commit_key
        commit_ts, xid, commit_lsn = self._commit_bytes
        if ts_ms is None:
            ts_ms = time.time_ns() // 1_000_000
        if ts_ms != self._now_ms:
            self._now_ms, self._now_bytes = ts_ms, BRANCH_1 + avro_long(ts_ms)
        if transaction is None:
            block = NULL
        else:
            if transaction.id != self._txn_id:
                self._txn_id, self._txn_id_bytes = transaction.id, avro_string(transaction.id)
            block = (BRANCH_1 + self._txn_id_bytes + avro_long(transaction.total_order)
                     + avro_long(transaction.data_collection_order))
        snapshot = SNAPSHOT_BYTES.get(source.snapshot) or avro_string(source.snapshot)
        sequence = NULL if source.sequence is None else BRANCH_1 + avro_string(source.sequence)
        toast_bytes = NULL if not toast else (
            avro_long(len(toast)) + b"".join(avro_string(name) for name in toast) + NULL)
        buf.write(b"".join((
            self._source_head, commit_ts, snapshot, self._db, sequence, self._schema_table,
            xid, optional_long(source.lsn), optional_long(source.xmin), commit_lsn,
            avro_long(source.txn_index), OP_BYTES[op], self._now_bytes, block, toast_bytes,
            unparsed_map(unparsed))))
        return buf.getvalue()
