"""Events to bytes in the Confluent wire format, and back (for tests and tools).

Wire format: byte 0, the schema id as 4 bytes big-endian, the Avro binary body. The body is
written by hand on the hot path -- the Envelope from pre-encoded constant pieces, Value and Key
rows by per-type encoders chosen once per codec -- and by fastavro ``schemaless_writer`` for any
column type those encoders do not handle; both give the same bytes (property-tested against
fastavro in tests/unit/avro/test_avro_envelope_bytes.py). Decoding is fastavro's.

    codec = CodecFactory(...).codec(relation)   # codecs.py: once per table version
    key, value = codec.change_from_tuples("c", None, insert.new, SourceInfo(...))
    key = codec.key_from_tuple(insert.new)                        # None: table without key
    value = codec.truncate(SourceInfo(...))

Rows are pgoutput TupleData (str / BinaryValue / None / UNCHANGED_TOAST), loaded with the
catalog's loaders chosen once per codec. Per column a converter chosen once (see `typemap`)
turns the loaded value into the Avro datum: Decimal, datetime, date, time, UUID, Interval,
Infinity, OutOfRange, addresses, nested lists...
Dates and timestamps outside 0001-01-01 .. 9999-12-31 (``infinity``, BC, years after 9999)
are clamped to that range (pgtypes' rule, schemas/README.md); numeric(p,s) NaN is null.

Unchanged TOAST: a column PostgreSQL did not send (``UNCHANGED_TOAST``) is null in `after` and
its Avro field name is listed in ``unchanged_toast``; in `before` and the key it is null.
Filling it from a REPLICA IDENTITY FULL old tuple is up to the caller (the assembler/pipeline).

Unparsed: a value its typed column's mapping refuses is null in its row and its exact text is
in the ``unparsed`` map (connector/avro/fallback.py); null there when nothing fell back.
"""

from __future__ import annotations

import io
import json
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from decimal import Context, Decimal
from functools import partial
from typing import Any, Final, NamedTuple

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.validation import validate

from connector.errors import SchemaError
from connector.pgoutput.lsn import lsn_to_str
from connector.pgoutput.messages import UNCHANGED_TOAST, TupleData
from connector.pgtypes import TypeCatalog
from connector.speedups import native

from .fallback import exact_text, fallback_datum, report_fallback, unparsed_name
from .fixed import fixed_schema
from .native_rows import row_plan
from .schema import ColumnSpec, TableSchemas

__all__ = ["MAGIC", "Decoded", "FixedCodec", "SourceInfo", "TableCodec", "TransactionBlock",
           "decode", "frame", "parse_frame"]

MAGIC: Final = 0
_HEADER: Final = struct.Struct(">bI")
OPS: Final = frozenset("cudrt")


def frame(schema_id: int, body: bytes) -> bytes:
    """Confluent wire format: magic byte, schema id, Avro body."""
    return _HEADER.pack(MAGIC, schema_id) + body


def parse_frame(data: bytes) -> tuple[int, memoryview]:
    """(schema id, Avro body) of a Confluent-framed message."""
    if len(data) < _HEADER.size:
        raise SchemaError(f"not a Confluent Avro message: {len(data)} bytes")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SchemaError(f"not a Confluent Avro message: magic byte {magic}")
    return schema_id, memoryview(data)[_HEADER.size:]


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


def _writer(parsed: Any, schema_id: int) -> Callable[[Any], bytes]:
    header = _HEADER.pack(MAGIC, schema_id)

    def write(datum: Any) -> bytes:
        buf = io.BytesIO()
        buf.write(header)
        schemaless_writer(buf, parsed, datum)
        return buf.getvalue()

    return write


# ------------------------------------------------------------------ Avro binary by hand
# The Envelope around the Value rows is the same for every event of a table but for a few
# longs, so it is written from pre-encoded pieces (fastavro writes only the Value rows): the
# same bytes as fastavro writing the whole Envelope (tests/unit/avro/test_avro_envelope_bytes.py),
# at a fraction of the cost.

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


# Varint pieces of 14 bits: two continuation bytes, or the last one or two bytes.
_CONTINUED: Final = tuple(bytes(((v & 0x7F) | 0x80, (v >> 7) | 0x80)) for v in range(16384))
_LAST: Final = tuple(bytes((v,)) if v < 0x80 else bytes(((v & 0x7F) | 0x80, v >> 7))
                     for v in range(16384))


def _varlong(n: int) -> bytes:
    """Avro long: zig-zag, then base-128 varint (built 14 bits at a time from tables)."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"{n} does not fit an Avro long")
    z = (n << 1) ^ (n >> 63)
    if z < 0x4000:
        return _LAST[z]
    if z < 0x1000_0000:
        return _CONTINUED[z & 0x3FFF] + _LAST[z >> 14]
    parts = []
    while z >= 0x4000:
        parts.append(_CONTINUED[z & 0x3FFF])
        z >>= 14
    parts.append(_LAST[z])
    return b"".join(parts)


_SMALL_LONGS: Final = tuple(_varlong(n) for n in range(16384))


def _long(n: int) -> bytes:
    return _SMALL_LONGS[n] if 0 <= n < 16384 else _varlong(n)


def _string(text: str) -> bytes:
    data = text.encode()
    return _long(len(data)) + data


def _optional_long(n: int | None) -> bytes:
    """["null", "long"]"""
    return b"\x00" if n is None else b"\x02" + _long(n)


_NULL: Final = b"\x00"
_BRANCH_1: Final = b"\x02"
_OP_BYTES: Final = {op: _string(op) for op in "cudrt"}
_SNAPSHOT_BYTES: Final = {flag: _string(flag) for flag in ("false", "true", "last")}


def _unparsed_bytes(unparsed: Mapping[str, str] | None) -> bytes:
    """["null", {"type": "map", "values": "string"}]: null when empty (one block otherwise)."""
    if not unparsed:
        return _NULL
    return (_BRANCH_1 + _long(len(unparsed))
            + b"".join(_string(name) + _string(text) for name, text in unparsed.items())
            + _NULL)


_DOUBLE: Final = struct.Struct("<d").pack
_FLOAT: Final = struct.Struct("<f").pack
_EXACT: Final = Context(prec=1000)  # scaleb without rounding
_INTEGER_LOGICAL: Final = frozenset({None, "date", "time-micros", "timestamp-micros",
                                     "local-timestamp-micros"})
RowEncoder = Callable[[Mapping[str, Any]], bytes]


def _int(value: int) -> bytes:
    """Avro int: 32 bits (a wider value is refused, not written as a long a reader misreads)."""
    if not -0x8000_0000 <= value <= 0x7FFF_FFFF:
        raise ValueError(f"{value} does not fit an Avro int")
    return _long(value)


def _boolean(value: Any) -> bytes:
    return b"\x01" if value else b"\x00"


def _bytes(value: bytes) -> bytes:
    return _long(len(value)) + bytes(value)


def _decimal(scale: int) -> Callable[[Decimal], bytes]:
    """Avro decimal: the unscaled value, big-endian two's complement, as fastavro sizes it."""

    def encode(value: Decimal) -> bytes:
        if value.as_tuple().exponent < -scale:  # type: ignore[operator]
            raise ValueError(f"{value} has more than {scale} fractional digits")
        unscaled = int(value.scaleb(scale, _EXACT))
        data = unscaled.to_bytes((abs(unscaled).bit_length() + 8) // 8, "big", signed=True)
        return _long(len(data)) + data

    return encode


def _array(items: Callable[[Any], bytes], nullable: bool) -> Callable[[list[Any]], bytes]:
    def encode(value: list[Any]) -> bytes:
        if not value:
            return _NULL
        if nullable:
            body = [_NULL if item is None else _BRANCH_1 + items(item) for item in value]
        else:
            body = [items(item) for item in value]
        return _long(len(value)) + b"".join(body) + _NULL

    return encode


def _type_encoder(avro_type: Any) -> Callable[[Any], bytes] | None:
    """The hand encoder of one (non-null) column type, for the datums pgtypes' converters give
    (ints for dates and times, str for uuid, Decimal for decimals); None: not handled here."""
    base: Any
    logical: Any
    if isinstance(avro_type, str):
        base, logical = avro_type, None
    elif isinstance(avro_type, dict):
        base, logical = avro_type.get("type"), avro_type.get("logicalType")
    else:
        return None
    if base == "array":
        items = avro_type["items"]
        nullable = isinstance(items, list)
        if nullable and (len(items) != 2 or items[0] != "null"):
            return None
        inner = _type_encoder(items[1] if nullable else items)
        return None if inner is None else _array(inner, nullable)
    if base == "int" and logical is None:
        return _int
    if base in ("int", "long") and logical in _INTEGER_LOGICAL:
        return _long
    if base == "string" and logical in (None, "uuid"):
        return _string
    if base == "bytes" and logical == "decimal":
        return _decimal(int(avro_type.get("scale", 0)))
    simple: dict[Any, Callable[[Any], bytes]] = {
        "boolean": _boolean, "double": _DOUBLE, "float": _FLOAT, "bytes": _bytes}
    return simple.get(base) if logical is None else None


def _row_encoder(columns: Sequence[ColumnSpec]) -> RowEncoder | None:
    """Encodes a record of ``["null", T]`` fields given as {name: None | (branch, datum)};
    None when a column type is not handled here (fastavro then writes the record)."""
    fields: list[tuple[str, Callable[[Any], bytes]]] = []
    for column in columns:
        encoder = _type_encoder(column.avro_type)
        if encoder is None:
            return None
        fields.append((column.avro_name, encoder))

    def encode(row: Mapping[str, Any]) -> bytes:
        return b"".join([_NULL if (value := row[name]) is None else _BRANCH_1 + enc(value[1])
                         for name, enc in fields])

    return encode


class _EnvelopeFrame:
    """Writes framed Envelopes of one table version: fastavro for the `Value` rows, the
    Source/op/ts_ms/transaction/unchanged_toast/unparsed fields from pre-encoded constants."""

    __slots__ = ("_header", "_value", "_encode_row", "_source_head", "_db", "_schema_table",
                 "_commit_key", "_commit_bytes", "_txn_id", "_txn_id_bytes", "_now_ms",
                 "_now_bytes", "native")

    def __init__(self, value_record: Any, encode_row: RowEncoder | None, schema_id: int,
                 constants: Mapping[str, str]) -> None:
        self._header = _HEADER.pack(MAGIC, schema_id)
        self._value = value_record  # parsed Value record schema
        self._encode_row = encode_row  # None: fastavro writes the rows
        self._source_head = (_string(constants["version"]) + _string(constants["connector"])
                             + _string(constants["name"]))
        self._db = _string(constants["db"])
        self._schema_table = _string(constants["schema"]) + _string(constants["table"])
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
                buf.write(_NULL)
            else:
                buf.write(_BRANCH_1)
                buf.write(fields)
        commit_key = (source.ts_ms, source.xid, source.commit_lsn)
        if commit_key != self._commit_key:
            self._commit_bytes = (_long(source.ts_ms), _optional_long(source.xid),
                                  _long(source.commit_lsn))
            self._commit_key = commit_key
        commit_ts, xid, commit_lsn = self._commit_bytes
        if ts_ms is None:
            ts_ms = time.time_ns() // 1_000_000
        if ts_ms != self._now_ms:
            self._now_ms, self._now_bytes = ts_ms, _BRANCH_1 + _long(ts_ms)
        if transaction is None:
            block = _NULL
        else:
            if transaction.id != self._txn_id:
                self._txn_id, self._txn_id_bytes = transaction.id, _string(transaction.id)
            block = (_BRANCH_1 + self._txn_id_bytes + _long(transaction.total_order)
                     + _long(transaction.data_collection_order))
        snapshot = _SNAPSHOT_BYTES.get(source.snapshot) or _string(source.snapshot)
        sequence = _NULL if source.sequence is None else _BRANCH_1 + _string(source.sequence)
        toast_bytes = _NULL if not toast else (
            _long(len(toast)) + b"".join(_string(name) for name in toast) + _NULL)
        buf.write(b"".join((
            self._source_head, commit_ts, snapshot, self._db, sequence, self._schema_table,
            xid, _optional_long(source.lsn), _optional_long(source.xmin), commit_lsn,
            _long(source.txn_index), _OP_BYTES[op], self._now_bytes, block, toast_bytes,
            _unparsed_bytes(unparsed))))
        return buf.getvalue()


def _parse(schema: Mapping[str, Any], what: str) -> Any:
    try:
        return parse_schema(dict(schema))
    except Exception as exc:  # fastavro raises SchemaParseError, ValueError, KeyError...
        raise SchemaError(f"invalid Avro schema for {what}: {exc}") from None


class TableCodec:
    """Encodes one table's keys and Envelope values for one schema version (see module doc).

    Speed: every union datum is handed to fastavro in its tuple notation ``(branch, datum)``,
    so fastavro does not validate the datum against each branch to pick one (for the
    ``["null", Value]`` of `before`/`after` that would validate the whole row).
    """

    def __init__(self, schemas: TableSchemas, key_id: int | None, value_id: int,
                 catalog: TypeCatalog) -> None:
        if (key_id is None) != (schemas.key_schema is None):
            raise SchemaError(f"{schemas.topic}: key schema id {key_id} does not match "
                              f"{'no' if schemas.key_schema is None else 'a'} key schema")
        self.schemas = schemas
        self.topic = schemas.topic
        self.key_id = key_id
        self.value_id = value_id
        constants = schemas.source_constants
        self._table = f"{constants['schema']}.{constants['table']}"
        columns = schemas.columns
        self._ncols = len(columns)
        self._names = tuple(c.avro_name for c in columns)
        self._branches = tuple(_branch(c.avro_type) for c in columns)
        # where an `unparsed` name sorts: before's columns, then after's (the C encoder's order)
        self._unparsed_order = {unparsed_name(c.avro_name, before): i + (0 if before else
                                                                           len(columns))
                                for before in (True, False) for i, c in enumerate(columns)}
        self._keys = tuple((c.index, c.avro_name) for c in schemas.key_columns)
        _parse(schemas.value_schema, schemas.topic)  # the whole Envelope must be valid Avro
        value_record = schemas.value_schema["fields"][0]["type"][1]  # before: ["null", Value]
        self._frame = _EnvelopeFrame(_parse(value_record, schemas.topic),
                                     _row_encoder(columns), value_id, schemas.source_constants)
        self._write_key: Callable[[Any], bytes] | None = None
        if schemas.key_schema is not None and key_id is not None:
            parsed_key = _parse(schemas.key_schema, schemas.topic + " key")
            encode_key = _row_encoder(schemas.key_columns)
            if encode_key is None:
                self._write_key = _writer(parsed_key, key_id)
            else:
                key_header = _HEADER.pack(MAGIC, key_id)
                self._write_key = lambda datum: key_header + encode_key(datum)
        loaders = catalog.row_loaders(schemas.relation.columns)
        self._text: tuple[Callable[[str], Any], ...] = tuple(
            _compose(load, c.convert) for load, c in zip(loaders.text, columns, strict=True))
        self._binary: tuple[Callable[[bytes], Any], ...] = tuple(
            _compose(load, c.convert) for load, c in zip(loaders.binary, columns, strict=True))
        self._plan: Any = None  # the C row encoder (connector.avro.native_rows), if any
        if self._frame.native is not None:
            self._plan = row_plan(columns, schemas.key_columns, self._text, self._binary,
                                  [_type_encoder(c.avro_type) for c in columns],
                                  self._fallback)
        self._key_header = b"" if key_id is None else _HEADER.pack(MAGIC, key_id)

    @property
    def has_native_rows(self) -> bool:
        """Whether the C row encoder serves this codec (`change_from_copy` can succeed)."""
        return self._plan is not None

    # ------------------------------------------------------------------ rows

    def _row_from_tuple(self, data: TupleData, toast: list[str] | None,
                        unparsed: dict[str, str], before: bool) -> dict[str, Any]:
        """pgoutput TupleData -> {field: None | (branch, datum)}; the exact text of a value that
        falls back to null goes to `unparsed` (`before`: the row is the Envelope's `before`)."""
        if len(data) != self._ncols:
            raise SchemaError(f"{self.topic}: tuple of {len(data)} columns for "
                              f"{self._ncols} columns")
        row: dict[str, Any] = {}
        text, binary, branches = self._text, self._binary, self._branches
        for i, (name, raw) in enumerate(zip(self._names, data, strict=True)):
            if raw is None:
                row[name] = None
                continue
            if raw is UNCHANGED_TOAST:
                row[name] = None
                if toast is not None:
                    toast.append(name)
                continue
            try:
                datum = text[i](raw) if isinstance(raw, str) else binary[i](raw)  # type: ignore[arg-type]
            except Exception as exc:  # DecodeError, a converter's ValueError...: the fallback
                datum = self._fallback(i, raw, exc)
                if datum is None:
                    unparsed[unparsed_name(name, before)] = exact_text(raw)
            row[name] = None if datum is None else (branches[i], datum)
        return row

    def _fallback(self, i: int, raw: Any, exc: BaseException) -> Any:
        """The datum of column `i` for a value its mapping refused (connector/avro/fallback.py)."""
        column = self.schemas.columns[i]
        report_fallback(self._table, column.pg_name, column.avro_type, raw, exc)
        return fallback_datum(column.avro_type, raw)

    # ------------------------------------------------------------------ keys

    def key_from_tuple(self, data: TupleData) -> bytes | None:
        """The framed key of a pgoutput tuple (new row, or the old key/row)."""
        if self._write_key is None:
            return None
        if self._plan is not None:
            fields: bytes | None
            try:
                fields = self._plan.key(data)
            except Exception:  # the Python path below raises the explained error
                fields = None
            if fields is not None:
                return self._key_header + fields
        if len(data) != self._ncols:
            raise SchemaError(f"{self.topic}: tuple of {len(data)} columns for "
                              f"{self._ncols} columns")
        row: dict[str, Any] = {}
        for index, name in self._keys:  # load the key columns only
            raw = data[index]
            if raw is None or raw is UNCHANGED_TOAST:
                row[name] = None
            else:
                try:
                    datum = (self._text[index](raw) if isinstance(raw, str)
                             else self._binary[index](raw))  # type: ignore[arg-type]
                except Exception as exc:
                    datum = self._fallback(index, raw, exc)
                row[name] = None if datum is None else (self._branches[index], datum)
        return self._encode_key(row)

    def _key_of(self, row: Mapping[str, Any]) -> bytes | None:
        if self._write_key is None:
            return None
        return self._encode_key({name: row[name] for _, name in self._keys})

    def _encode_key(self, datum: dict[str, Any]) -> bytes:
        assert self._write_key is not None
        try:
            return self._write_key(datum)
        except Exception as exc:
            if self._repair(exc, [datum], self.schemas.key_columns):
                return self._encode_key(datum)
            raise self._explain(exc, datum, self.schemas.key_columns, "key") from None

    def _repair(self, exc: Exception, rows: Sequence[dict[str, Any] | None],
                columns: Sequence[ColumnSpec], unparsed: dict[str, str] | None = None,
                raws: Sequence[TupleData | None] = ()) -> bool:
        """After an encoding failure: replace each datum that does not fit its column's Avro
        type by the fallback (connector/avro/fallback.py). Whether anything was replaced.

        `rows`: the Envelope's (before, after), or the key alone; `raws`: the tuples they were
        loaded from (the exact texts; without them a datum's str()); `unparsed`: the Envelope's
        map, kept in the C row encoder's order (before's columns, then after's)."""
        repaired = False
        for r, row in enumerate(rows):
            if row is None:
                continue
            tuple_data = raws[r] if r < len(raws) else None
            for column in columns:
                field = row.get(column.avro_name)
                datum = field[1] if isinstance(field, tuple) else field
                if validate(datum, ["null", column.avro_type], raise_errors=False):
                    continue
                raw = (tuple_data[column.index] if tuple_data is not None
                       else datum if isinstance(datum, str | bytes) else str(datum))
                report_fallback(self._table, column.pg_name, column.avro_type, raw, exc)
                text = fallback_datum(column.avro_type, raw)
                row[column.avro_name] = None if text is None else (
                    self._branches[column.index], text)
                if text is None and unparsed is not None:
                    unparsed[unparsed_name(column.avro_name, r == 0)] = exact_text(raw)
                repaired = True
        if repaired and unparsed:
            order = self._unparsed_order
            ordered = sorted(unparsed.items(), key=lambda item: order[item[0]])
            unparsed.clear()
            unparsed.update(ordered)
        return repaired

    # ------------------------------------------------------------------ values

    def value_from_tuples(self, op: str, old: TupleData | None, new: TupleData | None,
                          source: SourceInfo, *, ts_ms: int | None = None,
                          transaction: TransactionBlock | None = None) -> bytes:
        """The framed Envelope of a change, from pgoutput tuples (old: 'K'/'O' tuple)."""
        return self.change_from_tuples(op, old, new, source, ts_ms=ts_ms,
                                       transaction=transaction, with_key=False)[1]

    def change_from_tuples(self, op: str, old: TupleData | None, new: TupleData | None,
                           source: SourceInfo, *, ts_ms: int | None = None,
                           transaction: TransactionBlock | None = None,
                           with_key: bool = True) -> tuple[bytes | None, bytes]:
        """(key, value) of a change from pgoutput tuples, loading each tuple once.

        The key comes from `new` when there is one (insert, update), else from `old`."""
        if self._plan is not None and op in OPS:  # the C path; None: the Python one decides
            fast: tuple[bytes | None, bytes] | None = self._plan.change(
                self._frame.native, self._key_header, op, old, new, source, ts_ms,
                transaction, with_key)
            if fast is not None:
                return fast
        toast: list[str] = []
        unparsed: dict[str, str] = {}
        before = None if old is None else self._row_from_tuple(old, None, unparsed, True)
        after = None if new is None else self._row_from_tuple(new, toast, unparsed, False)
        key = None
        if with_key:
            keyed = after if after is not None else before
            key = None if keyed is None else self._key_of(keyed)
        return key, self._envelope(op, before, after, toast, source, ts_ms, transaction,
                                   unparsed, (old, new))

    def change_from_copy(self, op: str, line: bytes | bytearray | memoryview, source: SourceInfo, *,
                         ts_ms: int | None = None,
                         transaction: TransactionBlock | None = None,
                         ) -> tuple[bytes | None, bytes] | None:
        """(key, value) of a row given as one line of ``COPY ... TO STDOUT`` text output, by
        the C row encoder; None when there is none or it declines the line (the caller then
        parses the line and uses `change_from_tuples`, which explains any error)."""
        encode = self.copy_encoder(op)
        return None if encode is None else encode(line, source, ts_ms, transaction)

    def copy_encoder(self, op: str) -> Callable[..., tuple[bytes | None, bytes] | None] | None:
        """`change_from_copy` bound to `op` as one C callable, for a loop over many lines:
        ``encode(line, source, ts_ms, transaction)``; None without the C row encoder."""
        if self._plan is None or op not in OPS:
            return None
        return partial(self._plan.copy_change, self._frame.native, self._key_header, op)

    def truncate(self, source: SourceInfo, *, ts_ms: int | None = None,
                 transaction: TransactionBlock | None = None) -> bytes:
        """The framed Envelope of a truncate (op ``t``; publish it to every partition)."""
        return self._envelope("t", None, None, [], source, ts_ms, transaction)

    def _envelope(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
                  toast: list[str], source: SourceInfo, ts_ms: int | None,
                  transaction: TransactionBlock | None, unparsed: dict[str, str] | None = None,
                  raws: Sequence[TupleData | None] = ()) -> bytes:
        if op not in OPS:
            raise SchemaError(f"{self.topic}: unknown op {op!r} (expected one of c u d r t)")
        try:
            return self._frame.write(op, before, after, toast, source, ts_ms, transaction,
                                     unparsed)
        except Exception as exc:
            if unparsed is None:
                unparsed = {}
            if self._repair(exc, (before, after), self.schemas.columns, unparsed, raws):
                return self._envelope(op, before, after, toast, source, ts_ms, transaction,
                                      unparsed, raws)
            for row in (after, before):
                if row is not None:
                    raise self._explain(exc, row, self.schemas.columns, op, source) from None
            raise SchemaError(f"{self.topic}: cannot encode {op} event at commit LSN "
                              f"{lsn_to_str(source.commit_lsn)}: {exc}") from None

    def _explain(self, exc: Exception, row: Mapping[str, Any], columns: Sequence[ColumnSpec],
                 what: str, source: SourceInfo | None = None) -> SchemaError:
        """Which column's datum does not fit its Avro type (only on the failure path)."""
        where = "" if source is None else f" at commit LSN {lsn_to_str(source.commit_lsn)}"
        constants = self.schemas.source_constants
        table = f"{constants['schema']}.{constants['table']}"
        for column in columns:
            datum = row.get(column.avro_name)
            if isinstance(datum, tuple):
                datum = datum[1]
            if not validate(datum, ["null", column.avro_type], raise_errors=False):
                shown = repr(datum)
                shown = shown[:80] + "..." if len(shown) > 80 else shown
                return SchemaError(f"cannot encode {what} event of {table}{where}: column "
                                   f"{column.pg_name!r} value {shown} does not fit Avro type "
                                   f"{column.avro_type} ({type(exc).__name__}: {exc})")
        return SchemaError(f"cannot encode {what} event of {table}{where}: "
                           f"{type(exc).__name__}: {exc}")


def _branch(avro_type: Any) -> str:
    """The name fastavro's tuple notation uses for a union branch of this type."""
    if isinstance(avro_type, str):
        return avro_type
    kind = avro_type["type"]
    if kind in ("record", "enum", "fixed"):
        return str(avro_type["name"])
    return str(kind)


def _compose(load: Callable[[Any], Any], convert: Callable[[Any], Any] | None
             ) -> Callable[[Any], Any]:
    if convert is None:
        return load

    def load_convert(raw: Any) -> Any:
        value = load(raw)
        return None if value is None else convert(value)

    return load_convert


class FixedCodec:
    """Encodes records of one fixed schema (``pgcdc.Message``, ``pgcdc.Heartbeat``,
    ``pgcdc.TransactionMetadata``) with its registered id."""

    def __init__(self, full_name: str, schema_id: int) -> None:
        self.full_name = full_name
        self.schema = fixed_schema(full_name)
        self.schema_id = schema_id
        self._write = _writer(_parse(self.schema, full_name), schema_id)

    def encode(self, record: Mapping[str, Any]) -> bytes:
        try:
            return self._write(record)
        except Exception as exc:
            raise SchemaError(f"cannot encode {self.full_name} record: "
                              f"{type(exc).__name__}: {exc}") from None


class Decoded(NamedTuple):
    schema_id: int
    value: Any


def strip_logical_types(node: Any) -> Any:
    """A schema without its logical types: readers and writers of it see the raw Avro data
    (ints for dates and timestamps, bytes for decimals)."""
    if isinstance(node, dict):
        return {k: strip_logical_types(v) for k, v in node.items() if k != "logicalType"}
    if isinstance(node, list):
        return [strip_logical_types(v) for v in node]
    return node


_parsed_cache: dict[tuple[str, bool], Any] = {}


def decode(data: bytes, schema_lookup: Callable[[int], Mapping[str, Any]], *,
           logical_types: bool = True) -> Decoded:
    """Decode a Confluent-framed Avro message with its writer schema (`schema_lookup(id)`,
    e.g. `SchemaRegistry.schema`). `logical_types=False` returns the raw Avro data (ints for
    dates/times/timestamps, bytes for decimals)."""
    schema_id, body = parse_frame(data)
    schema = schema_lookup(schema_id)
    cache_key = (json.dumps(schema, sort_keys=True), logical_types)
    parsed = _parsed_cache.get(cache_key)
    if parsed is None:
        parsed = parse_schema(dict(schema) if logical_types else strip_logical_types(schema))
        _parsed_cache[cache_key] = parsed
    value = schemaless_reader(io.BytesIO(body), parsed, None)
    return Decoded(schema_id, value)
