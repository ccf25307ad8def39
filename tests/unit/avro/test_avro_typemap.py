"""The PostgreSQL -> Avro type mapping (connector/avro/typemap.py): every column type's Avro
type is the contract's, and every loaded value encodes with fastavro and reads back as the
documented datum; arrays take their declared dimensions."""

from __future__ import annotations

import datetime as dt
import io
import struct
from decimal import Decimal
from ipaddress import ip_interface, ip_network
from typing import Any
from uuid import UUID

import fastavro
import pytest

from connector.avro.connect import JSON_CONNECT_NAME
from connector.avro.datums import Converter
from connector.avro.typemap import column_codec
from connector.pgtypes import (
    INFINITY,
    NEG_INFINITY,
    Interval,
    OutOfRange,
    TypeCatalog,
    Unknown,
    oids,
)
from tests.support.avro import ENUM_ARRAY_OID, avro_shape, catalog

UTC = dt.UTC
CATALOG = TypeCatalog()
CATALOG.register_enum(16400, "mood", array_oid=16399)
CATALOG.register_domain(16410, oids.NUMERIC, name="price", base_typmod=((10 << 16) | 2) + 4)


def typmod(precision: int, scale: int) -> int:
    return ((precision << 16) | (scale & 0x7FF)) + 4


def _round_trip(schema: Any, datum: Any) -> Any:
    parsed = fastavro.parse_schema({"type": "record", "name": "r", "fields": [
        {"name": "v", "type": ["null", schema]}]})  # fmt: skip
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, parsed, {"v": datum})
    buffer.seek(0)
    return fastavro.schemaless_reader(buffer, parsed, parsed)["v"]  # type: ignore[call-overload, index]


def avro_type(oid: int, mod: int = -1) -> Any:
    return column_codec(CATALOG, oid, mod).avro_type


def converter(oid: int, mod: int = -1) -> Converter:
    """The column's converter; identity where the loaded value is the datum already."""
    convert = column_codec(CATALOG, oid, mod).convert
    return (lambda value: value) if convert is None else convert


def encode(oid: int, value: Any, mod: int = -1) -> Any:
    return _round_trip(avro_type(oid, mod), converter(oid, mod)(value))


@pytest.mark.parametrize(
    ("oid", "mod", "schema"),
    [
        (oids.BOOL, -1, "boolean"),
        (oids.INT2, -1, "int"),
        (oids.INT4, -1, "int"),
        (oids.INT8, -1, "long"),
        (oids.OID, -1, "long"),
        (oids.FLOAT4, -1, "float"),
        (oids.FLOAT8, -1, "double"),
        (oids.NUMERIC, -1, "string"),
        (
            oids.NUMERIC,
            typmod(10, 2),
            {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        ),
        (
            oids.NUMERIC,
            typmod(3, -2),
            {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 0},
        ),
        (
            oids.NUMERIC,
            typmod(2, 5),
            {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 5},
        ),
        (oids.NUMERIC, typmod(39, 2), "string"),
        (oids.MONEY, -1, "string"),
        (oids.DATE, -1, {"type": "int", "logicalType": "date"}),
        (oids.TIME, -1, {"type": "long", "logicalType": "time-micros"}),
        (oids.TIMESTAMP, -1, {"type": "long", "logicalType": "local-timestamp-micros"}),
        (oids.TIMESTAMPTZ, -1, {"type": "long", "logicalType": "timestamp-micros"}),
        (oids.TIMETZ, -1, "string"),
        (oids.INTERVAL, -1, "string"),
        (oids.UUID, -1, {"type": "string", "logicalType": "uuid"}),
        (oids.BYTEA, -1, "bytes"),
        (oids.JSON, -1, "string"),
        (oids.JSONB, -1, "string"),
        (oids.INET, -1, "string"),
        (oids.VARBIT, -1, "string"),
        (16400, -1, "string"),
        (99999, -1, "string"),
        (1007, -1, {"type": "array", "items": ["null", "int"]}),
        (16399, -1, {"type": "array", "items": ["null", "string"]}),
        (16410, -1, {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
    ],
)
def test_schema_fragments(oid: int, mod: int, schema: Any) -> None:
    assert avro_shape(avro_type(oid, mod)) == schema
    fastavro.parse_schema(
        {"type": "record", "name": "r", "fields": [{"name": "v", "type": schema}]}
    )


def test_scalars_round_trip_through_fastavro() -> None:
    assert encode(oids.BOOL, True) is True
    assert encode(oids.INT8, -(2**63)) == -(2**63)
    assert encode(oids.FLOAT4, 1.5) == 1.5
    assert encode(oids.NUMERIC, Decimal("NaN")) == "NaN"
    assert encode(oids.NUMERIC, Decimal("-Infinity")) == "-Infinity"
    assert encode(oids.NUMERIC, Decimal("1E-7")) == "0.0000001"
    assert encode(oids.NUMERIC, Decimal("1.50"), typmod(10, 2)) == Decimal("1.50")
    assert encode(oids.NUMERIC, Decimal("5"), typmod(10, 2)) == Decimal("5.00")
    assert encode(oids.NUMERIC, Decimal("NaN"), typmod(10, 2)) is None
    assert encode(oids.NUMERIC, Decimal("12000"), typmod(3, -3)) == Decimal("12000")
    assert encode(16410, Decimal("-0.01")) == Decimal("-0.01")
    assert encode(oids.MONEY, Decimal("-92233720368547758.08")) == "-92233720368547758.08"
    assert encode(oids.BYTEA, b"\x00") == b"\x00"
    assert converter(oids.UUID)(UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    assert encode(oids.UUID, UUID(int=1)) == UUID(int=1)  # fastavro reads logicalType uuid back
    assert encode(oids.INET, ip_interface("10.1.2.3/8")) == "10.1.2.3/8"
    assert encode(oids.CIDR, ip_network("::/0")) == "::/0"
    assert encode(oids.INTERVAL, Interval(14, -3, 1_500_000)) == "P1Y2M-3DT1.5S"
    assert encode(oids.JSONB, '{"a": 1}') == '{"a": 1}'
    assert encode(16400, "happy") == "happy"
    assert encode(99999, Unknown(99999, "(1,x)")) == "(1,x)"
    assert encode(99999, Unknown(99999, b"\x01\xff")) == "\\x01ff"
    assert column_codec(CATALOG, oids.INT4).convert is None  # identity: no call per value
    assert converter(oids.UUID)(None) is None


def test_dates_and_times() -> None:
    assert encode(oids.DATE, dt.date(1970, 1, 2)) == dt.date(1970, 1, 2)
    assert converter(oids.DATE)(dt.date(1969, 12, 31)) == -1
    to_micros = converter(oids.TIMESTAMP)
    # naive timestamps are the wall clock read as UTC, never the host's time zone
    assert to_micros(dt.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000
    assert to_micros(dt.datetime(2024, 1, 1, tzinfo=UTC)) == 1_704_067_200_000_000


def test_values_outside_0001_to_9999_are_clamped_to_what_readers_hold() -> None:
    """infinity, years after 9999, -infinity and BC read back (fastavro's logical types) as
    the last / first representable instant instead of failing the reader."""
    top, bottom = dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(1, 1, 1)
    for value in (INFINITY, OutOfRange("date", 3_000_000)):
        assert encode(oids.DATE, value) == dt.date.max
    for value in (NEG_INFINITY, OutOfRange("date", -800_000)):
        assert encode(oids.DATE, value) == dt.date.min
    # timestamptz a day inside: it stays in range shown in any time zone
    zoned_top, zoned_bottom = top - dt.timedelta(days=1), bottom + dt.timedelta(days=2)
    # timestamp is a local-timestamp-micros: it reads back naive
    for oid, high, low in ((oids.TIMESTAMP, top, bottom),
                           (oids.TIMESTAMPTZ, zoned_top.replace(tzinfo=UTC),
                            zoned_bottom.replace(tzinfo=UTC))):
        for value in (INFINITY, OutOfRange("timestamp", 2**63 + 5),
                      OutOfRange("timestamp", 253_402_300_800_000_000)):
            assert encode(oid, value) == high
        for value in (NEG_INFINITY, OutOfRange("timestamp", -(10**17))):
            assert encode(oid, value) == low
    assert encode(oids.TIMESTAMPTZ, dt.datetime(1, 1, 2, tzinfo=UTC)) == zoned_bottom.replace(
        tzinfo=UTC)
    assert encode(oids.TIMESTAMPTZ, dt.datetime(9999, 12, 31, tzinfo=UTC)) == zoned_top.replace(
        tzinfo=UTC)
    assert encode(oids.TIME, OutOfRange("time", 86_400_000_000)) == dt.time(23, 59, 59, 999999)


def test_times() -> None:
    assert encode(oids.TIMESTAMPTZ, dt.datetime(2024, 1, 1, tzinfo=UTC)) == dt.datetime(
        2024, 1, 1, tzinfo=UTC)  # fmt: skip
    assert encode(oids.TIME, dt.time(1, 2, 3, 4)) == dt.time(1, 2, 3, 4)
    zone = dt.timezone(dt.timedelta(hours=5, minutes=30))
    assert encode(oids.TIMETZ, dt.time(12, 0, 0, 500000, zone)) == "12:00:00.5+05:30"
    assert encode(oids.TIMETZ, dt.time(12, 0, tzinfo=UTC)) == "12:00:00+00"
    assert encode(oids.TIMETZ, OutOfRange("timetz", 86_400_000_000, -3600)) == "24:00:00-01"


def test_arrays() -> None:
    assert encode(1007, [1, None, 3]) == [1, None, 3]
    assert encode(1007, [[1, 2], [None, 4]]) == [1, 2, None, 4]  # flattened, row-major
    assert encode(oids.ARRAY_OF[oids.TIMESTAMP], [dt.datetime(1970, 1, 1), None]) == [
        dt.datetime(1970, 1, 1), None]  # fmt: skip
    assert encode(oids.ARRAY_OF[oids.NUMERIC], [[Decimal("1.5")], [Decimal("NaN")]]) == [
        "1.5",
        "NaN",
    ]
    assert encode(16399, ["a", None]) == ["a", None]
    assert encode(1007, []) == []


def test_loaded_values_from_both_formats_encode_identically() -> None:
    catalog = TypeCatalog()
    for oid, text, binary in [
        (oids.FLOAT4, "1.1", struct.pack(">f", 1.1)),
        (oids.TIMESTAMP, "2024-01-01 00:00:00", struct.pack(">q", 757_382_400_000_000)),
        (oids.TIMESTAMPTZ, "2024-01-01 05:30:00+05:30", struct.pack(">q", 757_382_400_000_000)),
        (oids.NUMERIC, "1.50", struct.pack(">hhHHHH", 2, 0, 0, 2, 1, 5000)),
    ]:
        codec = column_codec(catalog, oid)
        schema = codec.avro_type
        convert = codec.convert or (lambda value: value)
        from_text = convert(catalog.text_loader(oid)(text))
        from_binary = convert(catalog.binary_loader(oid)(binary))
        assert _round_trip(schema, from_text) == _round_trip(schema, from_binary)


def test_contract_types() -> None:
    cat = catalog()
    assert avro_shape(column_codec(cat, oids.TIMESTAMP).avro_type) == {
        "type": "long", "logicalType": "local-timestamp-micros"}
    assert column_codec(cat, oids.JSONB).avro_type == {
        "type": "string", "connect.name": JSON_CONNECT_NAME,
        "connect.parameters": {"__debezium.source.column.type": "JSONB"}}
    money = column_codec(cat, oids.MONEY)
    assert avro_shape(money.avro_type) == "string"
    assert money.convert is not None
    assert column_codec(cat, oids.INT4).convert is None  # identity: no call per value


def test_timestamp_datum_is_wall_clock_micros() -> None:
    codec = column_codec(catalog(), oids.TIMESTAMP)
    assert codec.convert is not None
    assert codec.convert(dt.datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000
    assert codec.convert(INFINITY) == 253_402_300_799_999_999  # 9999-12-31 23:59:59.999999


def test_array_shapes() -> None:
    cat = catalog()
    two = column_codec(cat, oids.ARRAY_OF[oids.INT4], dims=2).convert
    assert two is not None
    assert two([[1, 2], [3, None]]) == [[1, 2], [3, None]]
    assert two([[[1, 2], [3]], [[4]]]) == [[1, 2, 3], [4]]  # deeper than declared: flattened
    assert two([1, 2]) == [[1, 2]]  # shallower: wrapped
    assert two([]) == []
    one = column_codec(cat, oids.ARRAY_OF[oids.INT4]).convert
    assert one is not None
    same = [1, None, 3]
    assert one(same) is same  # nothing to convert: the list itself
    assert one([[1, 2], [3, 4]]) == [1, 2, 3, 4]
    dates = column_codec(cat, oids.ARRAY_OF[oids.DATE], dims=2).convert
    assert dates is not None
    assert dates([[dt.date(1970, 1, 3), None], [INFINITY]]) == [[2, None], [2_932_896]]


def test_enum_array_is_array_of_strings() -> None:
    codec = column_codec(catalog(), ENUM_ARRAY_OID)
    assert avro_shape(codec.avro_type) == {"type": "array", "items": ["null", "string"]}


# ---------------------------------------------------------------------------- Kafka Connect

SOURCE_TYPE = "__debezium.source.column.type"


def _params(oid: int, mod: int = -1, cat: TypeCatalog = CATALOG) -> dict[str, str]:
    return column_codec(cat, oid, mod).avro_type["connect.parameters"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("oid", "mod", "attributes"),
    [
        (oids.INT2, -1, {"connect.type": "int16"}),
        (oids.DATE, -1, {"connect.name": "org.apache.kafka.connect.data.Date"}),
        (oids.TIME, -1, {"connect.name": "io.debezium.time.MicroTime"}),
        (oids.TIMESTAMP, -1, {"connect.name": "io.debezium.time.MicroTimestamp"}),
        (oids.TIMESTAMPTZ, -1, {"connect.name": "io.debezium.time.MicroTimestamp"}),  # UTC
        (oids.UUID, -1, {"connect.name": "io.debezium.data.Uuid"}),
        (oids.JSON, -1, {"connect.name": JSON_CONNECT_NAME}),
        (oids.JSONB, -1, {"connect.name": JSON_CONNECT_NAME}),
        (oids.TIMETZ, -1, {}),  # a plain string: Debezium's ZonedTime would not parse it
        (oids.INT4, -1, {}),
        (oids.TEXT, -1, {}),
    ],
)
def test_connect_names_and_types(oid: int, mod: int, attributes: dict[str, str]) -> None:
    schema = avro_type(oid, mod)
    own = {k: v for k, v in schema.items() if k in ("connect.name", "connect.type")}
    assert own == attributes


def test_decimals_carry_connects_decimal_parameters() -> None:
    schema = avro_type(oids.NUMERIC, typmod(10, 2))
    assert schema["connect.name"] == "org.apache.kafka.connect.data.Decimal"
    assert schema["connect.parameters"] == {
        "scale": "2", "connect.decimal.precision": "10",
        SOURCE_TYPE: "NUMERIC", "__debezium.source.column.length": "10",
        "__debezium.source.column.scale": "2"}
    xid8 = avro_type(oids.XID8)
    assert xid8["connect.parameters"] == {"scale": "0", "connect.decimal.precision": "20",
                                          SOURCE_TYPE: "XID8"}
    # numeric(3,-2) is decimal(5,0) in Avro; the source parameters tell the column's own
    assert avro_type(oids.NUMERIC, typmod(3, -2))["connect.parameters"] == {
        "scale": "0", "connect.decimal.precision": "5", SOURCE_TYPE: "NUMERIC",
        "__debezium.source.column.length": "3", "__debezium.source.column.scale": "-2"}
    assert _params(oids.NUMERIC, typmod(39, 2)) == {  # a string: no Decimal parameters
        SOURCE_TYPE: "NUMERIC", "__debezium.source.column.length": "39",
        "__debezium.source.column.scale": "2"}


def test_source_column_type_length_and_scale() -> None:
    assert _params(oids.VARCHAR, 20 + 4) == {SOURCE_TYPE: "VARCHAR",
                                             "__debezium.source.column.length": "20"}
    assert _params(oids.BPCHAR, 3 + 4) == {SOURCE_TYPE: "BPCHAR",
                                           "__debezium.source.column.length": "3"}
    assert _params(oids.BIT, 5) == {SOURCE_TYPE: "BIT", "__debezium.source.column.length": "5"}
    assert _params(oids.VARCHAR) == {SOURCE_TYPE: "VARCHAR"}  # varchar without a length
    for oid, name in [(oids.INET, "INET"), (oids.CIDR, "CIDR"), (oids.MACADDR, "MACADDR"),
                      (oids.MONEY, "MONEY"), (oids.INTERVAL, "INTERVAL"), (oids.XML, "XML"),
                      (oids.TIMESTAMPTZ, "TIMESTAMPTZ"), (oids.INT2, "INT2")]:
        assert _params(oid) == {SOURCE_TYPE: name}
    assert _params(16400) == {SOURCE_TYPE: "MOOD"}  # an enum: its own name
    assert _params(16399) == {SOURCE_TYPE: "_MOOD"}  # an array: its pg_type name
    assert _params(oids.ARRAY_OF[oids.INT4]) == {SOURCE_TYPE: "_INT4"}
    # a domain: its own name, with its base type's length and scale
    assert _params(16410) == {"scale": "2", "connect.decimal.precision": "10",
                              SOURCE_TYPE: "PRICE", "__debezium.source.column.length": "10",
                              "__debezium.source.column.scale": "2"}
    assert avro_type(99999) == "string"  # a type not in pg_type: nothing to name


def test_every_mapped_type_has_its_connect_attributes() -> None:
    """Every built-in type the mapping knows, its array, and user types: connect.parameters
    naming the source type (a connect.name / connect.type where Connect has one), on the
    column's type and nothing else changed in the encoding."""
    from connector.avro.connect import CONNECT_NAMES, CONNECT_TYPES

    cases: list[tuple[int, int, str]] = []
    for oid, name in oids.NAMES.items():
        cases.append((oid, -1, name.upper()))
        array_oid = oids.ARRAY_OF.get(oid)
        if array_oid:
            cases.append((array_oid, -1, "_" + name.upper()))
    cases += [(oids.NUMERIC, typmod(10, 2), "NUMERIC"), (oids.VARCHAR, 24, "VARCHAR"),
              (16400, -1, "MOOD"), (16399, -1, "_MOOD"), (16410, -1, "PRICE"),
              (oids.INT2VECTOR, -1, "INT2VECTOR"), (oids.OIDVECTOR, -1, "OIDVECTOR")]
    for oid, mod, source_type in cases:
        schema = avro_type(oid, mod)
        assert isinstance(schema, dict), oid
        assert schema["connect.parameters"][SOURCE_TYPE] == source_type, oid
        element = schema
        while element.get("type") == "array":  # arrays: the element type carries the names
            items = element["items"]
            element = items[1] if isinstance(items, list) else items
            element = {"type": element} if isinstance(element, str) else element
        resolved = CATALOG.resolve(oid, mod)
        while resolved.kind == "array":
            assert resolved.element is not None
            resolved = resolved.element
        base = resolved.oid if resolved.kind == "builtin" else None
        if base in CONNECT_NAMES:
            assert element["connect.name"] == CONNECT_NAMES[base], oid
        elif base in CONNECT_TYPES:
            assert element["connect.type"] == CONNECT_TYPES[base], oid
        elif element.get("logicalType") == "decimal":
            assert element["connect.name"] == "org.apache.kafka.connect.data.Decimal", oid
            assert element["connect.parameters"]["scale"] == str(element["scale"]), oid
            assert element["connect.parameters"]["connect.decimal.precision"] == str(
                element["precision"]), oid
        else:
            assert "connect.name" not in element and "connect.type" not in element, oid
        fastavro.parse_schema({"type": "record", "name": "r",
                               "fields": [{"name": "v", "type": ["null", schema]}]})


def test_connect_attributes_do_not_change_the_encoding() -> None:
    """The bytes of a value are those of the type without its Connect attributes."""
    for oid, mod, value in [(oids.INT2, -1, 7), (oids.UUID, -1, UUID(int=5)),
                            (oids.TIMESTAMPTZ, -1, dt.datetime(2024, 1, 1, tzinfo=UTC)),
                            (oids.NUMERIC, typmod(10, 2), Decimal("1.25")),
                            (oids.TEXT, -1, "x"), (1007, -1, [1, None])]:
        datum = converter(oid, mod)(value)
        full, plain = avro_type(oid, mod), avro_shape(avro_type(oid, mod))
        out = []
        for schema in (full, plain):
            parsed = fastavro.parse_schema({"type": "record", "name": "r", "fields": [
                {"name": "v", "type": ["null", schema]}]})  # fmt: skip
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, parsed, {"v": datum})
            out.append(buffer.getvalue())
        assert out[0] == out[1], oid


# ---------------------------------------------------------------------------- column defaults


@pytest.mark.parametrize(
    ("oid", "mod", "text", "default"),
    [
        (oids.TEXT, -1, "dflt", "dflt"),
        (oids.BPCHAR, 3 + 4, "a  ", "a  "),  # padded, as stored
        (oids.INT2, -1, "7", 7),
        (oids.INT8, -1, "-9223372036854775808", -9223372036854775808),
        (oids.BOOL, -1, "t", True),
        (oids.FLOAT8, -1, "1.5", 1.5),
        (oids.FLOAT4, -1, "2", 2.0),
        (oids.DATE, -1, "2020-01-02", 18263),
        (oids.TIME, -1, "00:00:01", 1_000_000),
        (oids.TIMESTAMP, -1, "1970-01-01 00:00:00.000002", 2),
        (oids.TIMESTAMPTZ, -1, "2020-01-01 00:00:00+00", 1_577_836_800_000_000),
        (oids.UUID, -1, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
         "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        (oids.JSONB, -1, '{"a": 1}', '{"a": 1}'),
        (oids.INTERVAL, -1, "P3M", "P3M"),
        (oids.NUMERIC, -1, "1.50", "1.50"),  # unbounded numeric: its exact text
        (16400, -1, "happy", "happy"),  # an enum: its label
        # not carried: a bytes / decimal / array Avro type, a non-finite float, a bad text
        (oids.BYTEA, -1, "\\x00", None),
        (oids.NUMERIC, typmod(10, 2), "1.50", None),
        (oids.ARRAY_OF[oids.INT4], -1, "{1,2}", None),
        (oids.FLOAT8, -1, "NaN", None),
        (oids.FLOAT8, -1, "Infinity", None),
        (oids.INT4, -1, "x", None),
    ],
)
def test_constant_defaults_become_connect_defaults(oid: int, mod: int, text: str,
                                                   default: Any) -> None:
    schema = column_codec(CATALOG, oid, mod, 1, text).avro_type
    assert isinstance(schema, dict)
    if default is None:
        assert "connect.default" not in schema
    else:
        assert schema["connect.default"] == default
        assert type(schema["connect.default"]) is type(default)
    assert avro_shape(schema) == avro_shape(column_codec(CATALOG, oid, mod).avro_type)


def test_every_mapped_type_takes_a_default_or_none_and_keeps_its_encoding() -> None:
    """Over every built-in type (and its array): a default text PostgreSQL could print for it
    gives a connect.default of the JSON kind of the Avro type, or none; never an error, never
    another encoding (fastavro parses the schema and writes the same bytes)."""
    samples = ["0", "1", "t", "dflt", "2020-01-02", "12:00:00", "2020-01-02 03:04:05+00",
               "{1}", "NaN", "", "\\x01"]
    for oid in oids.NAMES:
        for type_oid in filter(None, (oid, oids.ARRAY_OF.get(oid))):
            plain = column_codec(CATALOG, type_oid).avro_type
            for text in samples:
                schema = column_codec(CATALOG, type_oid, -1, 1, text).avro_type
                assert {k: v for k, v in schema.items() if k != "connect.default"} == plain
                if "connect.default" in schema:
                    kinds = {"boolean": bool, "int": int, "long": int, "float": (int, float),
                             "double": (int, float), "string": str}
                    assert isinstance(schema["connect.default"], kinds[schema["type"]]), oid
                fastavro.parse_schema({"type": "record", "name": "r", "fields": [
                    {"name": "v", "type": ["null", schema], "default": None}]})  # fmt: skip
