"""--value-format debezium (connector/avro/debezium_types.py): each type's Avro
type with Debezium's Connect names and parameters, and its values as Debezium writes them,
through the producer's real codec (events decoded back with fastavro); the default format's
schemas are unchanged; the C rows writer gives the same bytes."""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.avro import SourceInfo, TableCodec, decode, derive_table_schemas
from connector.avro.schema import TRUNCATES, VALUE_FORMAT
from connector.avro.typemap import column_codec
from connector.config import load
from connector.errors import ConfigError
from connector.pgtypes import oids
from connector.pgtypes.catalog import PgType
from tests.support.avro import ENUM_OID, avro_shape, catalog, column, numeric_typmod, relation

SOURCE = SourceInfo(commit_lsn=100, txn_index=0, ts_ms=1, xid=1, lsn=100, snapshot="false")
COLUMNS = [
    column("id", oids.INT8, key=True), column("d", oids.DATE), column("t3", oids.TIME, 3),
    column("t", oids.TIME), column("ts3", oids.TIMESTAMP, 3), column("ts", oids.TIMESTAMP),
    column("tstz", oids.TIMESTAMPTZ), column("ttz", oids.TIMETZ),
    column("iv", oids.INTERVAL), column("b1", oids.BIT, 1), column("b5", oids.BIT, 5),
    column("vb", oids.VARBIT), column("n", oids.NUMERIC, numeric_typmod(10, 2)),
    column("nu", oids.NUMERIC), column("nu2", oids.NUMERIC), column("m", oids.MONEY),
    column("u", oids.UUID), column("x", oids.XML), column("j", oids.JSONB),
    column("mood", ENUM_OID),  # the test catalog's enum
]


def _codec(value_format: str, truncate_records: str | None = None) -> TableCodec:
    schemas = derive_table_schemas(relation(*COLUMNS), catalog(), prefix="p", db="db",
                                   value_format=value_format,
                                   truncate_records=truncate_records)
    return TableCodec(schemas, 1, 2, catalog())


def _after(codec: TableCodec, row: dict[str, str]) -> dict[str, Any]:
    data = tuple(row.get(c.name) for c in COLUMNS)
    _, value = codec.change_from_tuples("c", None, data, SOURCE)
    schemas = {1: codec.schemas.key_schema, 2: codec.schemas.value_schema}
    return decode(value, schemas.__getitem__, logical_types=False).value["after"]  # type: ignore[index]


def _types(codec: TableCodec) -> dict[str, Any]:
    fields = codec.schemas.value_schema["fields"][0]["type"][1]["fields"]
    return {f["name"]: f["type"][1] for f in fields}


def test_each_type_has_debeziums_connect_schema() -> None:
    types = _types(_codec("debezium"))
    named = {name: (t.get("type") if isinstance(t, dict) else t,
                    t.get("connect.name") if isinstance(t, dict) else None)
             for name, t in types.items()}
    assert named == {
        "id": ("long", None), "d": ("int", "io.debezium.time.Date"),
        "t3": ("int", "io.debezium.time.Time"), "t": ("long", "io.debezium.time.MicroTime"),
        "ts3": ("long", "io.debezium.time.Timestamp"),
        "ts": ("long", "io.debezium.time.MicroTimestamp"),
        "tstz": ("string", "io.debezium.time.ZonedTimestamp"),
        "ttz": ("string", "io.debezium.time.ZonedTime"),
        "iv": ("long", "io.debezium.time.MicroDuration"), "b1": ("boolean", None),
        "b5": ("bytes", "io.debezium.data.Bits"), "vb": ("bytes", "io.debezium.data.Bits"),
        "n": ("bytes", "org.apache.kafka.connect.data.Decimal"),
        "nu": ("record", "io.debezium.data.VariableScaleDecimal"),
        "nu2": ("io.debezium.data.VariableScaleDecimal", None),  # defined once per schema
        "m": ("bytes", "org.apache.kafka.connect.data.Decimal"),
        "u": ("string", "io.debezium.data.Uuid"), "x": ("string", "io.debezium.data.Xml"),
        "j": ("string", "io.debezium.data.Json"), "mood": ("string", "io.debezium.data.Enum"),
    }
    # AvroConverter's own attributes, as Debezium's topics carry them
    assert types["d"]["connect.version"] == 1 and "logicalType" not in types["d"]
    assert "logicalType" not in types["u"] and "logicalType" not in types["ts"]
    assert types["b5"]["connect.parameters"]["length"] == "5"
    assert types["vb"]["connect.parameters"]["length"] == "2147483647"
    assert (types["n"]["precision"], types["n"]["scale"], types["n"]["connect.parameters"]
            ["connect.decimal.precision"]) == (10, 2, "10")
    assert (types["m"]["precision"], types["m"]["connect.parameters"]["scale"]) == (64, "2")


def test_the_schema_says_its_format_and_truncates_only_in_debezium_format() -> None:
    assert VALUE_FORMAT not in _codec("pgcdc").schemas.value_schema
    schema = _codec("debezium", "none").schemas.value_schema
    assert (schema[VALUE_FORMAT], schema[TRUNCATES]) == ("debezium", "none")


def test_default_format_is_unchanged_by_the_setting() -> None:
    """The default's schemas do not depend on the new code path (byte-identical text)."""
    plain = derive_table_schemas(relation(*COLUMNS), catalog(), prefix="p", db="db")
    assert plain.value_json == _codec("pgcdc").schemas.value_json
    assert _types(_codec("pgcdc"))["tstz"]["logicalType"] == "timestamp-micros"


def test_values_as_debezium_writes_them() -> None:
    got = _after(_codec("debezium"), {
        "id": "1", "d": "2024-02-29", "t3": "12:34:56.789", "t": "23:59:59.999999",
        "ts3": "1969-12-31 23:59:59.999", "ts": "2024-01-02 03:04:05.000006",
        "tstz": "2024-01-02 03:04:05.5+05:30", "ttz": "01:02:03.5+03",
        "iv": "1 mon 2 days 00:00:01.000001", "b1": "1", "b5": "10011", "vb": "0101",
        "n": "-12.5", "nu": "-1.50", "nu2": "1e3", "m": "$1,234.50",
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "x": "<a/>", "j": '{"a": 1}',
        "mood": "happy"})
    assert got["d"] == 19782 and got["t3"] == 45_296_789 and got["t"] == 86_399_999_999
    assert got["ts3"] == -1 and got["ts"] == 1_704_164_645_000_006
    assert got["tstz"] == "2024-01-01T21:34:05.5Z"
    assert got["ttz"] == "22:02:03.5Z"  # the offset moved into the time, a day wrapped
    assert got["iv"] == 2_629_800_000_000 + 2 * 86_400_000_000 + 1_000_001
    assert got["b1"] is True and got["b5"] == bytes([0b10011])
    assert got["vb"] == bytes([0b101])
    assert Decimal(int.from_bytes(got["n"], "big", signed=True)).scaleb(-2) == Decimal("-12.5")
    assert got["nu"] == {"scale": 2, "value": (-150).to_bytes(2, "big", signed=True)}
    assert got["nu2"] == {"scale": 0, "value": (1000).to_bytes(2, "big", signed=True)}
    assert int.from_bytes(got["m"], "big", signed=True) == 123450
    assert (got["u"], got["x"], got["j"], got["mood"]) == (
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "<a/>", '{"a": 1}', "happy")


def test_values_debezium_cannot_hold_go_to_unparsed() -> None:
    codec = _codec("debezium")
    _, value = codec.change_from_tuples("c", None, tuple(
        {"id": "1", "nu": "NaN", "iv": "infinity"}.get(c.name) for c in COLUMNS), SOURCE)
    event = decode(value, {2: codec.schemas.value_schema}.__getitem__).value
    assert event["after"]["nu"] is None and event["after"]["iv"] is None
    assert event["unparsed"] == {"nu": "NaN", "iv": "infinity"}


@given(st.datetimes(min_value=dt.datetime(1, 1, 3), max_value=dt.datetime(9999, 12, 30),
                    timezones=st.just(dt.UTC)))
def test_zoned_timestamp_is_the_instant_at_utc(when: dt.datetime) -> None:
    convert = column_codec(catalog(), oids.TIMESTAMPTZ, value_format="debezium").convert
    assert convert is not None
    text = convert(when)
    assert text.endswith("Z") and dt.datetime.fromisoformat(text) == when
    # Java's ISO_OFFSET_DATE_TIME: 4-digit year, the fraction without trailing zeros
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z", text), text


@given(st.times(), st.integers(-15 * 60, 15 * 60))
def test_zoned_time_is_the_time_at_utc(time: dt.time, offset_minutes: int) -> None:
    local = time.replace(tzinfo=dt.timezone(dt.timedelta(minutes=offset_minutes)))
    convert = column_codec(catalog(), oids.TIMETZ, value_format="debezium").convert
    assert convert is not None
    text = convert(local)
    at_utc = dt.datetime.combine(dt.date(2000, 1, 2), local).astimezone(dt.UTC).time()
    assert dt.time.fromisoformat(text[:-1]) == at_utc and text.endswith("Z")


def test_config_value_format_and_its_truncate_default(tmp_path: Any) -> None:
    base = {"dsn": "host=x", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r"}
    assert load(None, {**base}).truncate_records == "every-partition"
    cfg = load(None, {**base, "value_format": "debezium"})
    assert (cfg.value_format, cfg.truncate_records) == ("debezium", "none")
    both = load(None, {**base, "value_format": "debezium",
                       "truncate_records": "every-partition"})
    assert both.truncate_records == "every-partition"
    with pytest.raises(ConfigError, match="value_format must be one of pgcdc, debezium"):
        load(None, {**base, "value_format": "avro"})


# ---------------------------------------------------------------------------- geometric, text
# search and extension types: Debezium's structs and arrays from the value's text

EXTENSIONS = {"geometry": 70001, "geography": 70002, "vector": 70003, "halfvec": 70004,
              "sparsevec": 70005}
SHAPES = [column("id", oids.INT8, key=True), column("p", oids.POINT),
          column("p2", oids.POINT), column("tv", oids.TSVECTOR),
          *(column(name, oid) for name, oid in EXTENSIONS.items()),
          column("sv2", EXTENSIONS["sparsevec"])]


def _shapes_codec(value_format: str) -> TableCodec:
    cat = catalog()
    for name, oid in EXTENSIONS.items():
        cat.add(PgType(oid, name, "public"))
    schemas = derive_table_schemas(relation(*SHAPES), cat, prefix="p", db="db",
                                   value_format=value_format)
    return TableCodec(schemas, 1, 2, cat)


def _shapes_event(value_format: str, row: dict[str, str]) -> dict[str, Any]:
    codec = _shapes_codec(value_format)
    _, value = codec.change_from_tuples("c", None, tuple(row.get(c.name) for c in SHAPES),
                                        SOURCE)
    return decode(value, {2: codec.schemas.value_schema}.__getitem__).value  # type: ignore[return-value]


EWKB_4326 = "0101000020E6100000000000000000F03F0000000000000040"  # SRID=4326;POINT(1 2)


def test_geometric_and_vector_types_as_debezium_writes_them() -> None:
    event = _shapes_event("debezium", {
        "id": "1", "p": "(1.5,-2)", "p2": "(NaN,-Infinity)", "tv": "'a':1 'cat':2A",
        "geometry": EWKB_4326, "geography": "0101000000000000000000F03F0000000000000040",
        "vector": "[1,2.5,-3e-05]", "halfvec": "[0.099975586,1]",
        "sparsevec": "{1:1.5,3:2}/5", "sv2": "{}/3"})
    got = event["after"]
    assert (got["p"]["x"], got["p"]["y"], got["p"]["srid"]) == (1.5, -2.0, None)
    # OGC WKB of a 2D point: little-endian marker, type 1, x, y
    assert got["p"]["wkb"] == b"\x01" + (1).to_bytes(4, "little") + struct.pack("<dd", 1.5, -2)
    assert math.isnan(got["p2"]["x"]) and got["p2"]["y"] == -math.inf
    assert got["tv"] == "'a':1 'cat':2A"
    assert got["geometry"] == {"wkb": bytes.fromhex(EWKB_4326), "srid": 4326}
    assert got["geography"]["srid"] == 0  # EWKB without an SRID: Debezium's 0
    assert got["vector"] == [1.0, 2.5, -3e-05] and got["halfvec"][1] == 1.0
    assert abs(got["halfvec"][0] - 0.099975586) < 1e-8  # an Avro float
    assert got["sparsevec"] == {"dimensions": 5, "vector": [{"key": 1, "value": 1.5},
                                                            {"key": 3, "value": 2.0}]}
    assert got["sv2"] == {"dimensions": 3, "vector": []}
    assert event["unparsed"] is None


def test_geometric_and_vector_types_connect_schemas() -> None:
    fields = _shapes_codec("debezium").schemas.value_schema["fields"][0]["type"][1]["fields"]
    types = {f["name"]: f["type"][1] for f in fields}
    assert types["p"]["connect.name"] == "io.debezium.data.geometry.Point"
    assert [f["name"] for f in types["p"]["fields"]] == ["x", "y", "wkb", "srid"]
    assert types["p2"] == "io.debezium.data.geometry.Point"  # a named record: defined once
    assert types["tv"]["connect.name"] == "io.debezium.data.Tsvector"
    assert types["geometry"]["connect.name"] == "io.debezium.data.geometry.Geometry"
    assert types["geography"]["connect.name"] == "io.debezium.data.geometry.Geography"
    assert (types["vector"]["type"], types["vector"]["items"], types["vector"]["connect.name"]
            ) == ("array", "double", "io.debezium.data.DoubleVector")
    assert (types["halfvec"]["items"], types["halfvec"]["connect.name"]) == (
        "float", "io.debezium.data.FloatVector")
    sparse = types["sparsevec"]
    assert sparse["connect.name"] == "io.debezium.data.SparseDoubleVector"
    entry = sparse["fields"][1]["type"]["items"]  # a Connect map of int16 keys
    assert (entry["namespace"], entry["name"]) == ("io.confluent.connect.avro", "MapEntry")
    # pgcdc's own format: every one of them the string of its text, as before
    plain = _shapes_codec("pgcdc").schemas.value_schema["fields"][0]["type"][1]["fields"]
    assert all(avro_shape(f["type"][1]) == "string" for f in plain if f["name"] != "id")


def test_values_beyond_debeziums_types_go_to_unparsed() -> None:
    event = _shapes_event("debezium", {"id": "1", "sparsevec": "{1:1}/100000",
                                       "p": "not a point", "geometry": "zz"})
    assert event["after"]["sparsevec"] is None and event["after"]["p"] is None
    assert event["unparsed"] == {"sparsevec": "{1:1}/100000", "p": "not a point",
                                 "geometry": "zz"}
