"""Column codecs: the contract's overrides of pgtypes' mapping, and array shapes."""

from __future__ import annotations

import datetime as dt

from avro_helpers import ENUM_ARRAY_OID, catalog

from connector.avro.columns import JSON_CONNECT_NAME, column_codec
from connector.pgtypes import INFINITY, oids


def test_overrides() -> None:
    cat = catalog()
    assert column_codec(cat, oids.TIMESTAMP).avro_type == {
        "type": "long", "logicalType": "local-timestamp-micros"}
    assert column_codec(cat, oids.JSONB).avro_type == {
        "type": "string", "connect.name": JSON_CONNECT_NAME}
    money = column_codec(cat, oids.MONEY)
    assert money.avro_type == "string"
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
    assert codec.avro_type == {"type": "array", "items": ["null", "string"]}
