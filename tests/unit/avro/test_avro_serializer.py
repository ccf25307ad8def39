"""Serializer: Confluent framing, every contract type through fastavro and back, from loaded
values (loaded_rows) and from pgoutput tuples; unchanged TOAST; truncate; errors that name the
column."""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from decimal import Decimal
from ipaddress import ip_address, ip_network
from typing import Any

import loaded_rows
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.avro import (
    FixedCodec,
    SourceInfo,
    TableCodec,
    TransactionBlock,
    decode,
    frame,
    unframe,
)
from connector.avro.encoder import transaction_id
from connector.avro.fixed import fixed_schema
from connector.avro.schema import derive_table_schemas
from connector.errors import SchemaError
from connector.pgoutput.messages import UNCHANGED_TOAST, BinaryValue
from connector.pgtypes import INFINITY, NEG_INFINITY, Interval, OutOfRange, oids
from tests.support.avro import DOMAIN_OID, ENUM_OID, catalog, column, numeric_typmod, relation

SOURCE = SourceInfo(commit_lsn=0x1_0000_0010, txn_index=3, ts_ms=1_700_000_000_000, xid=777,
                    lsn=0x1_0000_0008)
INT32_MAX, INT64_MIN = 2**31 - 1, -(2**63)
# The range every reader holds: 0001-01-01 .. 9999-12-31 23:59:59.999999 (schemas/README.md;
# timestamptz: 0001-01-03 .. 9999-12-30 23:59:59.999999)
DAYS_MAX, DAYS_MIN = 2_932_896, -719_162
MICROS_MAX, MICROS_MIN = 253_402_300_799_999_999, -62_135_596_800_000_000
UTC = dt.UTC


def codec_for(*columns: Any, key_id: int | None = 11, value_id: int = 12,
              **kwargs: Any) -> tuple[TableCodec, dict[int, dict[str, Any]]]:
    schemas = derive_table_schemas(relation(*columns), catalog(), prefix="p", db="d", **kwargs)
    if schemas.key_schema is None:
        key_id = None
    codec = TableCodec(schemas, key_id, value_id, catalog())
    lookup = {value_id: schemas.value_schema}
    if key_id is not None and schemas.key_schema is not None:
        lookup[key_id] = schemas.key_schema
    return codec, lookup


def test_frame_round_trip() -> None:
    data = frame(258, b"body")
    assert data == b"\x00\x00\x00\x01\x02body"
    schema_id, body = unframe(data)
    assert (schema_id, bytes(body)) == (258, b"body")
    with pytest.raises(SchemaError):
        unframe(b"\x01\x00\x00\x00\x01x")
    with pytest.raises(SchemaError):
        unframe(b"\x00\x00")


# (label, oid, typmod, loaded value, raw Avro datum, logical-type decoded value)
CASES: list[tuple[str, int, int, Any, Any, Any]] = [
    ("bool", oids.BOOL, -1, True, True, True),
    ("int2", oids.INT2, -1, -32768, -32768, -32768),
    ("int4", oids.INT4, -1, INT32_MAX, INT32_MAX, INT32_MAX),
    ("int8", oids.INT8, -1, INT64_MIN, INT64_MIN, INT64_MIN),
    ("oid", oids.OID, -1, 4_294_967_295, 4_294_967_295, 4_294_967_295),
    ("float4", oids.FLOAT4, -1, 1.5, 1.5, 1.5),
    ("float8", oids.FLOAT8, -1, -2.25e300, -2.25e300, -2.25e300),
    ("numeric(10,2)", oids.NUMERIC, numeric_typmod(10, 2), Decimal("-12345678.90"),
     (-1234567890).to_bytes(4, "big", signed=True), Decimal("-12345678.90")),
    ("numeric(10,2) NaN", oids.NUMERIC, numeric_typmod(10, 2), Decimal("NaN"), None, None),
    ("numeric", oids.NUMERIC, -1, Decimal("0.0000001"), "0.0000001", "0.0000001"),
    ("numeric NaN", oids.NUMERIC, -1, Decimal("NaN"), "NaN", "NaN"),
    ("numeric Infinity", oids.NUMERIC, -1, Decimal("-Infinity"), "-Infinity", "-Infinity"),
    ("text", oids.TEXT, -1, "héllo", "héllo", "héllo"),
    ("varchar", oids.VARCHAR, 24, "v", "v", "v"),
    ("bpchar", oids.BPCHAR, 7, "ab ", "ab ", "ab "),
    ("name", oids.NAME, -1, "n", "n", "n"),
    ("xml", oids.XML, -1, "<a/>", "<a/>", "<a/>"),
    ("inet", oids.INET, -1, ip_address("10.0.0.1"), "10.0.0.1", "10.0.0.1"),
    ("cidr", oids.CIDR, -1, ip_network("10.0.0.0/8"), "10.0.0.0/8", "10.0.0.0/8"),
    ("macaddr", oids.MACADDR, -1, "08:00:2b:01:02:03", "08:00:2b:01:02:03",
     "08:00:2b:01:02:03"),
    ("money", oids.MONEY, -1, Decimal("-12.34"), "-12.34", "-12.34"),
    ("bit", oids.BIT, 3, "101", "101", "101"),
    ("timetz", oids.TIMETZ, -1, dt.time(12, 0, 1, 500, tzinfo=dt.timezone(dt.timedelta(
        hours=5, minutes=30))), "12:00:01.0005+05:30", "12:00:01.0005+05:30"),
    ("interval", oids.INTERVAL, -1, Interval(14, 3, 3_600_000_000), "P1Y2M3DT1H",
     "P1Y2M3DT1H"),
    ("json", oids.JSON, -1, '{"a": [1, 2]}', '{"a": [1, 2]}', '{"a": [1, 2]}'),
    ("jsonb", oids.JSONB, -1, '{"a": 1}', '{"a": 1}', '{"a": 1}'),
    ("uuid", oids.UUID, -1, uuid.UUID(int=1), str(uuid.UUID(int=1)), uuid.UUID(int=1)),
    ("bytea", oids.BYTEA, -1, b"\x00\xff", b"\x00\xff", b"\x00\xff"),
    ("date", oids.DATE, -1, dt.date(2024, 2, 29), 19782, dt.date(2024, 2, 29)),
    ("date infinity", oids.DATE, -1, INFINITY, DAYS_MAX, dt.date.max),
    ("date -infinity", oids.DATE, -1, NEG_INFINITY, DAYS_MIN, dt.date.min),
    ("date BC", oids.DATE, -1, OutOfRange("date", -800_000), DAYS_MIN, dt.date.min),
    ("time", oids.TIME, -1, dt.time(23, 59, 59, 999999), 86_399_999_999,
     dt.time(23, 59, 59, 999999)),
    ("time 24:00", oids.TIME, -1, OutOfRange("time", 86_400_000_000), 86_399_999_999,
     dt.time(23, 59, 59, 999999)),
    ("timestamp", oids.TIMESTAMP, -1, dt.datetime(2024, 1, 2, 3, 4, 5, 6),
     1_704_164_645_000_006, dt.datetime(2024, 1, 2, 3, 4, 5, 6)),
    ("timestamp infinity", oids.TIMESTAMP, -1, INFINITY, MICROS_MAX,
     dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    ("timestamptz", oids.TIMESTAMPTZ, -1, dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
     1_704_164_645_000_006, dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
    ("timestamptz -infinity", oids.TIMESTAMPTZ, -1, NEG_INFINITY, MICROS_MIN + 2 * 86_400_000_000,
     dt.datetime(1, 1, 3, tzinfo=UTC)),
    ("enum", ENUM_OID, -1, "happy", "happy", "happy"),
    ("domain numeric(12,3)", DOMAIN_OID, -1, Decimal("1.500"),
     (1500).to_bytes(2, "big", signed=True), Decimal("1.500")),
    ("int4[]", oids.ARRAY_OF[oids.INT4], -1, [1, None, 3], [1, None, 3], [1, None, 3]),
    ("date[]", oids.ARRAY_OF[oids.DATE], -1, [dt.date(1970, 1, 2), None, INFINITY],
     [1, None, DAYS_MAX], None),
    ("text[] empty", oids.ARRAY_OF[oids.TEXT], -1, [], [], []),
]


@pytest.mark.parametrize(("label", "oid", "typmod", "value", "raw", "logical"), CASES,
                         ids=[c[0] for c in CASES])
def test_type_round_trip(label: str, oid: int, typmod: int, value: Any, raw: Any,
                         logical: Any) -> None:
    codec, lookup = codec_for(column("id", oids.INT4, key=True), column("v", oid, typmod))
    data = loaded_rows.value(codec, "c", None, (1, value), SOURCE)
    assert unframe(data)[0] == 12
    decoded = decode(data, lookup.__getitem__, logical_types=False).value
    assert decoded["after"] == {"id": 1, "v": raw}
    if logical is not None:
        assert decode(data, lookup.__getitem__).value["after"]["v"] == logical


def test_multidimensional_array_values() -> None:
    codec, lookup = codec_for(column("id", oids.INT4, key=True),
                              column("grid", oids.ARRAY_OF[oids.INT4]),
                              column("flat", oids.ARRAY_OF[oids.INT4]),
                              array_dims={"grid": 2})
    data = loaded_rows.value(codec, "c", None, (1, [[1, 2], [None, 4]], [[1, 2], [3, 4]]),
                             SOURCE)
    after = decode(data, lookup.__getitem__).value["after"]
    assert after["grid"] == [[1, 2], [None, 4]]
    assert after["flat"] == [1, 2, 3, 4]  # more dimensions than declared: flattened
    data = loaded_rows.value(codec, "c", None, (1, [5, 6], []), SOURCE)
    after = decode(data, lookup.__getitem__).value["after"]
    assert after["grid"] == [[5, 6]]  # fewer: wrapped
    assert after["flat"] == []


def test_from_pgoutput_tuples_text_and_binary() -> None:
    codec, lookup = codec_for(
        column("id", oids.INT8, key=True), column("price", oids.NUMERIC, numeric_typmod(8, 2)),
        column("at", oids.TIMESTAMPTZ), column("tags", oids.ARRAY_OF[oids.TEXT]),
        column("u", oids.UUID), column("n", oids.INT4))
    new = ("42", "3.10", "2024-01-02 03:04:05.5+00", '{a,"b c",NULL}',
           "00000000-0000-0000-0000-000000000001", None)
    data = codec.value_from_tuples("c", None, new, SOURCE)
    after = decode(data, lookup.__getitem__).value["after"]
    assert after == {"id": 42, "price": Decimal("3.10"),
                     "at": dt.datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=UTC),
                     "tags": ["a", "b c", None], "u": uuid.UUID(int=1), "n": None}
    binary = (BinaryValue(struct.pack(">q", 42)), "3.10", "2024-01-02 03:04:05.5+00", None,
              None, BinaryValue(struct.pack(">i", -7)))
    after = decode(codec.value_from_tuples("c", None, binary, SOURCE),
                   lookup.__getitem__).value["after"]
    assert (after["id"], after["n"]) == (42, -7)
    key = codec.key_from_tuple(binary)
    assert key is not None and unframe(key)[0] == 11
    assert decode(key, lookup.__getitem__).value == {"id": 42}


def test_envelope_fields() -> None:
    codec, lookup = codec_for(column("id", oids.INT4, key=True), column("v", oids.TEXT))
    block = TransactionBlock(transaction_id(777, SOURCE.commit_lsn), 4, 2)
    data = codec.value_from_tuples("u", ("1", "old"), ("1", "new"),
                                   SOURCE._replace(snapshot="false"), ts_ms=123,
                                   transaction=block)
    envelope = decode(data, lookup.__getitem__).value
    assert envelope["op"] == "u"
    assert envelope["before"] == {"id": 1, "v": "old"}
    assert envelope["after"] == {"id": 1, "v": "new"}
    assert envelope["ts_ms"] == 123
    assert envelope["transaction"] == {"id": f"777:{SOURCE.commit_lsn}", "total_order": 4,
                                       "data_collection_order": 2}
    assert envelope["unchanged_toast"] == []
    source = envelope["source"]
    assert source["commit_lsn"] == SOURCE.commit_lsn and source["txn_index"] == 3
    assert (source["txId"], source["lsn"], source["ts_ms"]) == (777, SOURCE.lsn, SOURCE.ts_ms)
    assert (source["connector"], source["name"], source["db"], source["schema"],
            source["table"], source["snapshot"]) == ("postgresql", "p", "d", "public", "t",
                                                     "false")


def test_unchanged_toast_is_null_and_listed() -> None:
    codec, lookup = codec_for(column("id", oids.INT4, key=True), column("big text", oids.TEXT),
                              column("doc", oids.JSONB), column("n", oids.INT4))
    data = codec.value_from_tuples("u", None, ("1", UNCHANGED_TOAST, UNCHANGED_TOAST, "5"),
                                   SOURCE)
    envelope = decode(data, lookup.__getitem__).value
    assert envelope["after"] == {"id": 1, "big_x0020text": None, "doc": None, "n": 5}
    assert envelope["unchanged_toast"] == ["big_x0020text", "doc"]
    data = codec.value_from_tuples("u", ("1", None, None, None), ("1", UNCHANGED_TOAST, "{}", "5"),
                                   SOURCE)
    envelope = decode(data, lookup.__getitem__).value
    assert envelope["unchanged_toast"] == ["big_x0020text"]
    assert envelope["before"] == {"id": 1, "big_x0020text": None, "doc": None, "n": None}


def test_delete_and_truncate() -> None:
    codec, lookup = codec_for(column("id", oids.INT4, key=True), column("v", oids.TEXT))
    deleted = decode(codec.value_from_tuples("d", ("9", None), None, SOURCE),
                     lookup.__getitem__).value
    assert (deleted["op"], deleted["before"], deleted["after"]) == (
        "d", {"id": 9, "v": None}, None)
    truncate = decode(codec.truncate(SOURCE), lookup.__getitem__).value
    assert (truncate["op"], truncate["before"], truncate["after"]) == ("t", None, None)
    assert truncate["source"]["commit_lsn"] == SOURCE.commit_lsn


def test_table_without_key() -> None:
    codec, _ = codec_for(column("a", oids.INT4), column("b", oids.TEXT))
    assert codec.key_id is None
    assert codec.key_from_tuple(("1", "x")) is None


def test_key_ids_must_match_schemas() -> None:
    schemas = derive_table_schemas(relation(column("a", oids.INT4)), catalog(), prefix="p",
                                   db="d")
    with pytest.raises(SchemaError):
        TableCodec(schemas, 5, 6, catalog())


def test_values_a_mapping_refuses_fall_back_naming_the_column(
        caplog: pytest.LogCaptureFixture) -> None:
    """A value that does not load, or a datum that does not fit, never stops the stream: a
    typed column publishes null (connector/avro/fallback.py), with a warning naming it."""
    codec, lookup = codec_for(column("id", oids.INT4, key=True), column("qty", oids.INT2))
    framed = loaded_rows.value(codec, "c", None, (1, "many"), SOURCE)  # a datum that does not fit
    assert decode(framed, lookup.__getitem__).value["after"] == {"id": 1, "qty": None}
    assert "column 'qty' of public.t: value 'many'" in caplog.text
    key, framed = codec.change_from_tuples("c", None, ("1", "many"), SOURCE)  # does not load
    assert decode(framed, lookup.__getitem__).value["after"] == {"id": 1, "qty": None}
    assert key is not None and decode(key, lookup.__getitem__).value == {"id": 1}
    assert loaded_rows.key(codec, ("one", 2)) is not None  # key datum that does not fit
    assert "column 'id' of public.t: value 'one'" in caplog.text


def test_malformed_events_still_raise() -> None:
    codec, _ = codec_for(column("id", oids.INT4, key=True), column("qty", oids.INT2))
    with pytest.raises(SchemaError, match="tuple of 1 columns for 2 columns"):
        codec.change_from_tuples("c", None, ("1",), SOURCE)
    with pytest.raises(SchemaError, match="unknown op"):
        codec.change_from_tuples("x", None, ("1", "2"), SOURCE)


def test_a_table_without_columns() -> None:
    """CREATE TABLE t () is legal: its events carry empty rows."""
    codec, lookup = codec_for()
    key, value = codec.change_from_tuples("c", None, (), SOURCE)
    assert key is None
    assert decode(value, lookup.__getitem__).value["after"] == {}


def test_fixed_codecs_round_trip() -> None:
    for name, record in [
        ("pgcdc.Heartbeat", {"name": "p", "db": "d", "ts_ms": 1, "lsn": 2, "restart_lsn": 1}),
        ("pgcdc.Heartbeat", {"name": "p", "db": "d", "ts_ms": 1, "lsn": 2, "restart_lsn": None}),
        ("pgcdc.TransactionMetadata", {
            "status": "END", "id": "5:10", "ts_ms": 1, "xid": 5, "commit_lsn": 10,
            "end_lsn": 11, "event_count": 3,
            "data_collections": [{"data_collection": "public.t", "event_count": 3}]}),
    ]:
        codec = FixedCodec(name, 99)
        decoded = decode(codec.encode(record), {99: fixed_schema(name)}.__getitem__).value
        assert decoded == record
    with pytest.raises(SchemaError):
        FixedCodec("pgcdc.Heartbeat", 1).encode({"name": "p"})


def test_change_from_tuples_loads_once_and_keys_by_the_right_row() -> None:
    codec, lookup = codec_for(column("id", oids.INT4, key=True), column("v", oids.TEXT))
    key, value = codec.change_from_tuples("c", None, ("5", "x"), SOURCE, ts_ms=1)
    assert key == codec.key_from_tuple(("5", "x"))
    assert value == codec.value_from_tuples("c", None, ("5", "x"), SOURCE, ts_ms=1)
    key, value = codec.change_from_tuples("u", ("4", None), ("5", "x"), SOURCE, ts_ms=1)
    assert decode(key, lookup.__getitem__).value == {"id": 5}  # type: ignore[arg-type]
    key, _ = codec.change_from_tuples("d", ("4", None), None, SOURCE, ts_ms=1)
    assert decode(key, lookup.__getitem__).value == {"id": 4}  # type: ignore[arg-type]


# The codec hands fastavro union data in tuple notation for speed; the bytes must be exactly
# what fastavro writes for the plain datum.
_EQUIV_COLUMNS = [column("id", oids.INT8, key=True), column("t", oids.TEXT),
                  column("n", oids.NUMERIC, numeric_typmod(12, 3)), column("f", oids.FLOAT8),
                  column("b", oids.BOOL), column("ts", oids.TIMESTAMPTZ), column("d", oids.DATE),
                  column("a", oids.ARRAY_OF[oids.INT4]), column("j", oids.JSONB),
                  column("u", oids.UUID), column("raw", oids.BYTEA)]


def _plain_envelope(codec: TableCodec, op: str, before: Any, after: Any, toast: list[str],
                    source: SourceInfo, ts_ms: int, block: TransactionBlock | None) -> bytes:
    import io

    from fastavro import parse_schema, schemaless_writer

    def row(values: Any) -> Any:
        if values is None:
            return None
        out = {}
        for spec, value in zip(codec.schemas.columns, values, strict=True):
            if value is None or value is UNCHANGED_TOAST:
                out[spec.avro_name] = None
            else:
                out[spec.avro_name] = value if spec.convert is None else spec.convert(value)
        return out

    constants = codec.schemas.source_constants
    datum = {"before": row(before), "after": row(after),
             "source": {**constants, "ts_ms": source.ts_ms, "snapshot": source.snapshot,
                        "sequence": source.sequence, "txId": source.xid, "lsn": source.lsn,
                        "xmin": source.xmin, "commit_lsn": source.commit_lsn,
                        "txn_index": source.txn_index},
             "op": op, "ts_ms": ts_ms,
             "transaction": None if block is None else block._asdict(),
             "unchanged_toast": toast}
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(codec.schemas.value_schema), datum)
    return frame(codec.value_id, buf.getvalue())


_rows = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.one_of(st.none(), st.just(UNCHANGED_TOAST), st.text(max_size=20)),
    st.one_of(st.none(), st.decimals(min_value=-10**8, max_value=10**8, places=3,
                                     allow_nan=False)),
    st.one_of(st.none(), st.floats(allow_nan=False)),
    st.one_of(st.none(), st.booleans()),
    st.one_of(st.none(), st.datetimes(timezones=st.just(UTC)), st.sampled_from([INFINITY])),
    st.one_of(st.none(), st.dates()),
    st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
                                  max_size=4)),
    st.one_of(st.none(), st.just(UNCHANGED_TOAST), st.just('{"k": [1, null]}')),
    st.one_of(st.none(), st.uuids()),
    st.one_of(st.none(), st.binary(max_size=8)),
)


@settings(max_examples=150, deadline=None)
@given(_rows, st.one_of(st.none(), _rows), st.sampled_from(["c", "u", "d", "r"]),
       st.one_of(st.none(), st.integers(0, 2**40)), st.booleans())
def test_tuple_notation_bytes_equal_plain_fastavro(after: Any, before: Any, op: str,
                                                   xid: int | None, with_block: bool) -> None:
    codec, _ = codec_for(*_EQUIV_COLUMNS)
    source = SOURCE._replace(xid=xid, sequence=None if xid is None else "s")
    block = TransactionBlock("1:2", 3, 4) if with_block else None
    toast = [spec.avro_name for spec, value in zip(codec.schemas.columns, after, strict=True)
             if value is UNCHANGED_TOAST]
    before_row = None if before is None else tuple(
        None if v is UNCHANGED_TOAST else v for v in before)
    ours = loaded_rows.value(codec, op, before_row, after, source, ts_ms=99,
                             transaction=block)
    assert ours == _plain_envelope(codec, op, before_row, after, toast, source, 99, block)
    key = loaded_rows.key(codec, after)
    assert key is not None and decode(key, {11: codec.schemas.key_schema}.__getitem__
                                      ).value == {"id": after[0]}  # type: ignore[dict-item]


def test_each_run_builds_codecs_with_its_writer(avro_writer: str) -> None:
    """conftest.py's switch works: the "python" run has no C path in its codecs."""
    codec, _ = codec_for(column("id", oids.INT4, key=True))
    assert codec.writer == avro_writer
    python = codec._frame.native is None and not codec.has_native_rows
    assert python == (avro_writer == "python")


def test_a_copy_line_is_encoded_by_either_writer() -> None:
    """`copy_encoder` always gives the event: the C writer's, or (a line it declines, or the
    Python writer) that of the line's parsed values -- escapes, NULL, a value that falls back."""
    codec, lookup = codec_for(column("id", oids.INT4, key=True), column("note", oids.TEXT),
                              column("n", oids.INT8))
    encode = codec.copy_encoder("r")
    for line, after in [(b"1\ta\\tb\\\\\t5\n", {"id": 1, "note": "a\tb\\", "n": 5}),
                        (b"2\t\\N\t\\N", {"id": 2, "note": None, "n": None}),
                        (b"3\tx\t1e99", {"id": 3, "note": "x", "n": None})]:
        key, value = encode(line, SOURCE, 5, None)
        assert (key, value) == codec.change_from_copy("r", line, SOURCE, ts_ms=5)
        assert decode(value, lookup.__getitem__).value["after"] == after
        assert key is not None and decode(key, lookup.__getitem__).value == {"id": after["id"]}
    assert decode(encode(b"3\tx\t1e99", SOURCE, 5, None)[1], lookup.__getitem__
                  ).value["unparsed"] == {"n": "1e99"}


def test_a_key_no_writer_can_encode_gets_the_explained_error() -> None:
    """A text key with a lone surrogate: the C key writer's ValueError goes to the Python
    path, which raises the SchemaError (not a bare UnicodeEncodeError)."""
    codec, _ = codec_for(column("k", oids.TEXT, key=True))
    with pytest.raises(SchemaError, match="cannot encode key event of public.t: "
                                          "UnicodeEncodeError"):
        codec.key_from_tuple(("\ud800",))

