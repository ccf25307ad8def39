"""The fallback rule (connector/avro/fallback.py): a value a column's mapping refuses is
published -- its exact text in a string column, null in a typed one with the exact text in the
Envelope's `unparsed` map -- with one warning per column and a count in
pgcdc_values_fallback_total; never an error that stops the stream, never a value lost."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from prometheus_client import REGISTRY

from connector.avro import SourceInfo, TableCodec, decode, derive_table_schemas
from connector.avro.fallback import (
    admits_text,
    exact_text,
    fallback_datum,
    report_fallback,
    unparsed_name,
)
from connector.avro.typemap import column_codec
from connector.pgoutput.messages import BinaryValue
from connector.pgtypes import oids
from tests.support.avro import avro_shape, catalog, column, relation

SOURCE = SourceInfo(1, 2, 3)


def _count(table: str, column_name: str) -> float:
    value = REGISTRY.get_sample_value("pgcdc_values_fallback_total",
                                      {"table": table, "column": column_name})
    return value or 0.0


@pytest.mark.parametrize(("avro_type", "admits"), [
    ("string", True),
    ({"type": "string", "connect.name": "io.debezium.data.Json"}, True),
    ({"type": "string", "logicalType": "uuid"}, False),
    ("long", False),
    ({"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}, False),
    ({"type": "array", "items": ["null", "string"]}, False),
])
def test_which_types_admit_the_exact_text(avro_type: Any, admits: bool) -> None:
    assert admits_text(avro_type) is admits
    assert fallback_datum(avro_type, "x y") == ("x y" if admits else None)


def test_binary_values_fall_back_to_hex_text() -> None:
    assert fallback_datum("string", BinaryValue(b"\x00\xff")) == "\\x00ff"
    assert exact_text(BinaryValue(b"\x00\xff")) == "\\x00ff" and exact_text("1 2") == "1 2"
    assert unparsed_name("c", False) == "c" and unparsed_name("c", True) == "before.c"


def test_one_warning_per_column_and_every_value_counted(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    before = _count("s.once", "c")
    for raw in ("a", "b", "c"):
        report_fallback("s.once", "c", "string", raw, ValueError("nope"))
    assert caplog.text.count("column 'c' of s.once") == 1
    assert "'a' published as its exact text: ValueError: nope" in caplog.text
    assert _count("s.once", "c") == before + 3


def _codec(*columns: Any) -> tuple[TableCodec, dict[int, Any]]:
    schemas = derive_table_schemas(relation(*columns), catalog(), prefix="p", db="d")
    codec = TableCodec(schemas, 11, 12, catalog())
    return codec, {12: schemas.value_schema, 11: schemas.key_schema}


def test_a_string_column_carries_the_exact_text(caplog: pytest.LogCaptureFixture) -> None:
    """pg_lsn (a string) sent in binary with a wrong length: its bytes as hex text, both
    writers (this module runs with the C one and the Python one)."""
    codec, lookup = _codec(column("id", oids.INT4, key=True), column("lsn", oids.PG_LSN),
                           column("ok", oids.TEXT))
    before = _count("public.t", "lsn")
    key, value = codec.change_from_tuples(
        "c", None, ("1", BinaryValue(b"\x01\x02\x03"), "fine"), SOURCE)
    after = decode(value, lookup.__getitem__).value["after"]
    assert after == {"id": 1, "lsn": "\\x010203", "ok": "fine"}
    assert key is not None and decode(key, lookup.__getitem__).value == {"id": 1}
    assert "column 'lsn' of public.t" in caplog.text
    assert _count("public.t", "lsn") == before + 1


def test_a_typed_column_publishes_null_and_its_text_in_unparsed() -> None:
    codec, lookup = _codec(column("id", oids.INT4, key=True), column("b", oids.BOOL),
                           column("ia", oids.ARRAY_OF[oids.INT4]), column("d", oids.DATE))
    _, value = codec.change_from_tuples(
        "u", ("1", "x", "{1,{2}}", None), ("1", "t", "{1,2}", BinaryValue(b"\x07")), SOURCE)
    got = decode(value, lookup.__getitem__).value
    assert got["before"] == {"id": 1, "b": None, "ia": None, "d": None}
    assert got["after"] == {"id": 1, "b": True, "ia": [1, 2], "d": None}
    assert got["unparsed"] == {"before.b": "x", "before.ia": "{1,{2}}", "d": "\\x07"}
    _, value = codec.change_from_tuples("c", None, ("1", "t", "{1,2}", None), SOURCE)
    assert decode(value, lookup.__getitem__).value["unparsed"] is None


def test_a_value_too_big_for_its_avro_type_is_kept_as_its_text() -> None:
    """Loaded fine, refused by the encoder (an int4 text beyond 32 bits, numeric beyond its
    precision): the same rule, with the text PostgreSQL sent, not the loaded value's."""
    codec, lookup = _codec(column("id", oids.INT4, key=True), column("i", oids.INT4),
                           column("n", oids.NUMERIC, ((4 << 16) | 2) + 4))
    _, value = codec.change_from_tuples("c", None, ("1", "+4294967296", "123.456"), SOURCE)
    got = decode(value, lookup.__getitem__).value
    assert got["after"] == {"id": 1, "i": None, "n": None}
    assert got["unparsed"] == {"i": "+4294967296", "n": "123.456"}


def test_a_key_column_that_does_not_load_still_gives_a_key() -> None:
    codec, lookup = _codec(column("id", oids.INT4, key=True), column("t", oids.TEXT))
    key = codec.key_from_tuple(("not an int", "x"))
    assert key is not None and decode(key, lookup.__getitem__).value == {"id": None}


def test_xid8_and_vectors_map_to_types_holding_their_range() -> None:
    """xid8 (unsigned 64-bit) is decimal(20,0); oidvector / int2vector arrays of long / int."""
    types = catalog()
    xid8 = column_codec(types, oids.XID8)
    assert avro_shape(xid8.avro_type) == {"type": "bytes", "logicalType": "decimal",
                                          "precision": 20, "scale": 0}
    assert xid8.convert is not None and xid8.convert(2**64 - 1) == Decimal(2**64 - 1)
    assert avro_shape(column_codec(types, oids.OIDVECTOR).avro_type) == {
        "type": "array", "items": ["null", "long"]}
    assert avro_shape(column_codec(types, oids.INT2VECTOR).avro_type) == {
        "type": "array", "items": ["null", "int"]}
    for oid in (oids.OID, oids.XID, oids.CID):  # unsigned 32-bit: a long holds them
        assert avro_shape(column_codec(types, oid).avro_type) == "long"
    codec, lookup = _codec(column("id", oids.INT4, key=True), column("x8", oids.XID8),
                           column("ov", oids.OIDVECTOR))
    _, value = codec.change_from_tuples("c", None, ("1", str(2**64 - 1), "1 4294967295"),
                                        SOURCE)
    assert decode(value, lookup.__getitem__).value["after"] == {
        "id": 1, "x8": Decimal(2**64 - 1), "ov": [1, 2**32 - 1]}
