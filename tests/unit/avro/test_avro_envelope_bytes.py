"""The hand-written Avro (the Envelope's Source, op, ts_ms, transaction, unchanged_toast,
unparsed from pre-encoded pieces; Value and Key rows by per-type encoders) is byte for byte
what fastavro writes, for any source block, transaction block, TOAST list, unparsed map and
column values."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Context, Decimal
from typing import Any

import loaded_rows
import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.avro import (
    SourceInfo,
    TableCodec,
    TransactionBlock,
    decode,
    derive_table_schemas,
    frame,
)
from connector.avro.binary import type_encoder
from connector.errors import SchemaError
from connector.pgtypes import oids
from tests.support.avro import catalog, column, numeric_typmod, relation

LONG = st.integers(-(2**63), 2**63 - 1)
NAMES = st.lists(st.sampled_from(["v", "big", "Größe", "a_x0041"]), max_size=3)


def _codec(prefix: str = "p", db: str = "d", table: str = "t") -> TableCodec:
    schemas = derive_table_schemas(
        relation(column("id", oids.INT8, key=True), column("v", oids.TEXT), table=table),
        catalog(), prefix=prefix, db=db)
    return TableCodec(schemas, 11, 12, catalog())


def _fastavro(codec: TableCodec, op: str, before: Any, after: Any, toast: list[str],
              source: SourceInfo, ts_ms: int, block: TransactionBlock | None,
              unparsed: dict[str, str] | None = None) -> bytes:
    datum = {"before": before, "after": after,
             "source": {**codec.schemas.source_constants, "ts_ms": source.ts_ms,
                        "snapshot": source.snapshot, "sequence": source.sequence,
                        "txId": source.xid, "lsn": source.lsn, "xmin": source.xmin,
                        "commit_lsn": source.commit_lsn, "txn_index": source.txn_index},
             "op": op, "ts_ms": ts_ms,
             "transaction": None if block is None else block._asdict(),
             "unchanged_toast": toast, "unparsed": unparsed or None}  # {}: written as null
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(codec.schemas.value_schema), datum)
    return frame(codec.value_id, buf.getvalue())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from("cudrt"), st.one_of(st.none(), LONG), st.one_of(st.none(), LONG),
       st.builds(SourceInfo, commit_lsn=LONG, txn_index=LONG, ts_ms=LONG,
                 xid=st.one_of(st.none(), LONG), lsn=st.one_of(st.none(), LONG),
                 snapshot=st.sampled_from(["false", "true", "last", "incremental"]),
                 xmin=st.one_of(st.none(), LONG), sequence=st.one_of(st.none(), st.text())),
       st.one_of(st.none(), st.builds(TransactionBlock, st.text(), LONG, LONG)), LONG, NAMES,
       st.one_of(st.none(), st.dictionaries(st.text(), st.text(), max_size=3)))
def test_envelope_bytes_equal_fastavro(op: str, before_id: int | None, after_id: int | None,
                                       source: SourceInfo, block: TransactionBlock | None,
                                       ts_ms: int, toast: list[str],
                                       unparsed: dict[str, str] | None) -> None:
    codec = _codec()
    before = None if before_id is None else {"id": ("long", before_id), "v": None}
    after = None if after_id is None else {"id": ("long", after_id), "v": ("string", "x")}
    plain_before = None if before is None else {"id": before_id, "v": None}
    plain_after = None if after is None else {"id": after_id, "v": "x"}
    ours = codec._envelope(op, before, after, toast, source, ts_ms, block, unparsed)
    assert ours == _fastavro(codec, op, plain_before, plain_after, toast, source, ts_ms, block,
                             unparsed)


def test_consecutive_events_of_a_transaction_reuse_nothing_stale() -> None:
    codec = _codec(prefix="pre.fix", db="shop", table="Order Items")
    for commit_lsn, xid, index in [(100, 7, 0), (100, 7, 1), (200, 8, 0), (200, None, 1),
                                   (300, 9, 20_000), (300, 9, -1)]:
        source = SourceInfo(commit_lsn, index, 1_700_000_000_000 + commit_lsn, xid, commit_lsn)
        block = TransactionBlock(f"{xid}:{commit_lsn}", index + 2, index + 2)
        for ts_ms in (5, 5, 6):
            row = {"id": ("long", index), "v": None}
            ours = codec._envelope("c", None, row, ["v"], source, ts_ms, block)
            assert ours == _fastavro(codec, "c", None, {"id": index, "v": None}, ["v"], source,
                                     ts_ms, block)


def test_a_long_out_of_range_is_a_schema_error() -> None:
    codec = _codec()
    source = SourceInfo(2**63, 0, 0)
    with pytest.raises(SchemaError, match="cannot encode"):
        codec.truncate(source, ts_ms=0)


# ---------------------------------------------------------------- rows written by hand

def _plain(codec: TableCodec, values: Any) -> Any:
    """A row of loaded values as plain fastavro data (the contract converters applied)."""
    if values is None:
        return None
    return {spec.avro_name: None if value is None else
            (value if spec.convert is None else spec.convert(value))
            for spec, value in zip(codec.schemas.columns, values, strict=True)}


def _typed_codec() -> TableCodec:
    schemas = derive_table_schemas(relation(
        column("id", oids.INT8, key=True), column("k2", oids.NUMERIC, numeric_typmod(38, 10),
                                                   key=True),
        column("i2", oids.INT2), column("i4", oids.INT4), column("f4", oids.FLOAT4),
        column("f8", oids.FLOAT8), column("n0", oids.NUMERIC, numeric_typmod(18, 0)),
        column("nu", oids.NUMERIC), column("t", oids.TEXT), column("b", oids.BOOL),
        column("by", oids.BYTEA), column("u", oids.UUID), column("d", oids.DATE),
        column("tm", oids.TIME), column("ts", oids.TIMESTAMP), column("tz", oids.TIMESTAMPTZ),
        column("ia", oids.ARRAY_OF[oids.INT4]), column("iaa", oids.ARRAY_OF[oids.INT4]),
        column("na", oids.ARRAY_OF[oids.NUMERIC], numeric_typmod(6, 2)),
        column("ta", oids.ARRAY_OF[oids.TEXT])), catalog(), prefix="p", db="d",
        array_dims={"iaa": 2})
    return TableCodec(schemas, 11, 12, catalog())


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    exact = Context(prec=100)
    return st.integers(-(10**precision) + 1, 10**precision - 1).map(
        lambda unscaled: Decimal(unscaled).scaleb(-scale, exact))


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


INT32 = st.integers(-(2**31), 2**31 - 1)
TYPED_ROWS = st.tuples(
    LONG, _decimals(38, 10), _opt(st.integers(-(2**15), 2**15 - 1)), _opt(INT32),
    _opt(st.floats(width=32)), _opt(st.floats()), _opt(_decimals(18, 0)),
    _opt(st.decimals(allow_nan=False, allow_infinity=False)), _opt(st.text()),
    _opt(st.booleans()), _opt(st.binary()), _opt(st.uuids()), _opt(st.dates()),
    _opt(st.times()), _opt(st.datetimes()), _opt(st.datetimes(timezones=st.just(dt.UTC))),
    _opt(st.lists(_opt(INT32), max_size=4)),
    _opt(st.lists(st.lists(_opt(INT32), min_size=2, max_size=2), max_size=3)),
    _opt(st.lists(_opt(_decimals(6, 2)), max_size=3)), _opt(st.lists(_opt(st.text()),
                                                                      max_size=3)))


@settings(max_examples=300, deadline=None)
@given(TYPED_ROWS, _opt(TYPED_ROWS))
def test_rows_and_keys_written_by_hand_equal_fastavro(after: Any, before: Any) -> None:
    codec = _typed_codec()
    assert codec._frame._encode_row is not None  # every column type here is written by hand
    source = SourceInfo(1, 2, 3, 4, 5)
    ours = loaded_rows.value(codec, "u", before, after, source, ts_ms=9)
    assert ours == _fastavro(codec, "u", _plain(codec, before), _plain(codec, after), [],
                             source, 9, None)
    key = {"id": after[0], "k2": _plain(codec, after)["k2"]}
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(codec.schemas.key_schema), key)
    assert loaded_rows.key(codec, after) == frame(11, buf.getvalue())


def test_unhandled_types_are_left_to_fastavro() -> None:
    nested = {"type": "array", "items": {"type": "map", "values": "long"}}
    for avro_type in ("null", {"type": "fixed", "size": 2}, nested,
                      {"type": "long", "logicalType": "timestamp-millis"}):
        assert type_encoder(avro_type) is None


def test_a_wrong_datum_falls_back_and_names_its_column(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    """A datum its Avro type cannot take never stops the stream: the fallback rule
    (connector/avro/fallback.py) publishes a typed column as null and warns, naming it."""
    codec = _typed_codec()
    row = [1, Decimal("1.5")] + [None] * 18
    row[5] = "not a float"
    row[8] = "kept"
    framed = loaded_rows.value(codec, "c", None, row, SourceInfo(1, 2, 3), ts_ms=0)
    event = decode(framed, lambda _: codec.schemas.value_schema).value
    after = event["after"]
    assert after["f8"] is None and after["t"] == "kept" and after["id"] == 1
    assert event["unparsed"] == {"f8": "not a float"}  # the datum's text (no tuple given here)
    assert "column 'f8' of public.t" in caplog.text
