"""An outbox payload's Avro (connector/avro/payload.py): the record derived from a composite
type through the one type mapping (nested composites, domains over them, arrays of scalars;
arrays of composites refused in one line), values from the text and binary forms, the
evolution after ALTER TYPE, and a non-composite payload's own Avro type. Pure: the catalog is
filled as the source catalog's queries would fill it."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader

from connector.avro.fastavro_io import decode
from connector.avro.payload import AvroPayload, PayloadCodec, payload_codec
from connector.avro.typemap import column_codec
from connector.errors import ConfigError, DecodeError
from connector.pgtypes import TypeCatalog, oids

EVENT, LINE, DOMAIN, EVENT_ARRAY, BAD = 70001, 70002, 70003, 70004, 70005
EVENT_ATTRS = [("id", oids.INT4, -1, 0), ("note", oids.TEXT, -1, 0),
               ("amount", oids.NUMERIC, (10 << 16 | 2) + 4, 0),
               ("at", oids.TIMESTAMP, -1, 0), ("tags", oids.ARRAY_OF[oids.TEXT], -1, 1),
               ("line", DOMAIN, -1, 0), ("again", LINE, -1, 0)]
LINE_ATTRS = [("sku", oids.VARCHAR, -1, 0), ("qty", oids.INT8, -1, 0)]


def catalog(event_attrs: list[tuple[str, int, int, int]] = EVENT_ATTRS) -> TypeCatalog:
    types = TypeCatalog()
    types.add_rows([  # (oid, ns, name, typtype, base, typmod, elem, array, len, delim, cat)
        (EVENT, "shop", "order_event", "c", 0, -1, 0, EVENT_ARRAY, -1, ",", "C"),
        (LINE, "shop", "line", "c", 0, -1, 0, 0, -1, ",", "C"),
        (DOMAIN, "shop", "checked_line", "d", LINE, -1, 0, 0, -1, ",", "C"),
        (EVENT_ARRAY, "shop", "_order_event", "b", 0, -1, EVENT, 0, -1, ",", "A", True),
        (BAD, "shop", "bad", "c", 0, -1, 0, 0, -1, ",", "C"),
    ])
    types.add_composite_rows([EVENT], [(EVENT, *a) for a in event_attrs])
    types.add_composite_rows([LINE], [(LINE, *a) for a in LINE_ATTRS])
    types.add_composite_rows([BAD], [(BAD, "events", EVENT_ARRAY, -1, 1)])
    return types


def codec(types: TypeCatalog | None = None) -> PayloadCodec:
    return payload_codec(types or catalog(), EVENT, where="outbox table shop.outbox, column p")


def read(codec: PayloadCodec, datum: Any) -> Any:
    """The datum written with the codec's schema and read back (what a consumer sees)."""
    import io

    from fastavro import schemaless_writer
    parsed = parse_schema(codec.schema)
    buf = io.BytesIO()
    schemaless_writer(buf, parsed, datum)
    buf.seek(0)
    return schemaless_reader(buf, parsed, parsed)


def test_a_composite_is_a_record_of_its_attributes_by_the_column_mapping() -> None:
    schema = codec().schema
    assert (schema["type"], schema["namespace"], schema["name"]) == ("record", "shop",
                                                                     "order_event")
    fields = {f["name"]: f for f in schema["fields"]}
    assert list(fields) == [a[0] for a in EVENT_ATTRS]
    types = catalog()
    for name, oid, typmod, dims in EVENT_ATTRS[:5]:  # the one mapping: as a table column's
        assert fields[name]["type"] == ["null", column_codec(types, oid, typmod,
                                                             max(dims, 1)).avro_type]
        assert fields[name]["default"] is None
    line = fields["line"]["type"][1]  # a domain over a composite: its record
    assert (line["type"], line["name"], [f["name"] for f in line["fields"]]) == (
        "record", "line", ["sku", "qty"])
    assert fields["again"]["type"] == ["null", "shop.line"]  # defined once, then named
    parse_schema(schema)  # valid Avro


def test_values_from_text_load_per_attribute_type() -> None:
    c = codec()
    text = ('(7,"a,""b"" \\\\c (x)",1234.50,"2024-02-29 12:34:56.789","{""x,y"",NULL,""""}",'
            '"(s1,2)",)')
    datum = c.text(text)
    assert datum == {"id": 7, "note": 'a,"b" \\c (x)', "amount": Decimal("1234.50"),
                     "at": datum["at"], "tags": ["x,y", None, ""],
                     "line": {"sku": "s1", "qty": 2}, "again": None}
    back = read(c, datum)
    assert back["at"] == dt.datetime(2024, 2, 29, 12, 34, 56, 789000)  # local-timestamp
    assert back["amount"] == Decimal("1234.50") and back["line"] == {"sku": "s1", "qty": 2}
    assert c.text("(,,,,,,)") == dict.fromkeys(datum)  # every attribute NULL
    assert c.text('(1,"",,,{},,)')["note"] == ""  # empty is not NULL


def _send(values: list[tuple[int, bytes | None]]) -> bytes:
    out = struct.pack(">i", len(values))
    for oid, data in values:
        out += struct.pack(">Ii", oid, -1 if data is None else len(data)) + (data or b"")
    return out


def test_values_from_binary_load_per_attribute_type() -> None:
    line = _send([(oids.VARCHAR, b"s1"), (oids.INT8, struct.pack(">q", 2))])
    data = _send([(oids.INT4, struct.pack(">i", 7)), (oids.TEXT, "ü".encode()),
                  (oids.NUMERIC, None), (oids.TIMESTAMP, None),
                  (oids.ARRAY_OF[oids.TEXT], None), (DOMAIN, line), (LINE, None)])
    assert codec().binary(data) == {"id": 7, "note": "ü", "amount": None, "at": None,
                                    "tags": None, "line": {"sku": "s1", "qty": 2},
                                    "again": None}


def test_an_array_of_composites_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"attribute events is an array of composite type "
                                          r"shop.order_event.*payload_format: stored"):
        payload_codec(catalog(), BAD, where="outbox table shop.outbox, column p")


def test_a_non_composite_payload_is_its_column_type() -> None:
    c = payload_codec(TypeCatalog(), oids.JSONB, where="outbox table shop.outbox, column p")
    assert c.schema == {"type": "string", "connect.name": "io.debezium.data.Json",
                        "connect.parameters": {"__debezium.source.column.type": "JSONB"}}
    assert c.text('{"a": 1}') == '{"a": 1}'


class Registry:
    def __init__(self) -> None:
        self.subjects: list[tuple[str, str]] = []

    def register(self, topic: str, schema: str) -> int:
        """Like a registry: the same schema under the same subject keeps its id."""
        if (topic, schema) not in self.subjects:
            self.subjects.append((topic, schema))
        return self.subjects.index((topic, schema)) + 1

    def schema(self, schema_id: int) -> dict[str, Any]:
        import json
        return dict(json.loads(self.subjects[schema_id - 1][1]))


def test_alter_type_evolves_the_schema_registered_per_topic() -> None:
    """ADD ATTRIBUTE: the next value has one more attribute than known; the type is read again
    and the new version registered (per topic, at its next record)."""
    small = [a for a in EVENT_ATTRS if a[0] in ("id", "note")]
    versions = [small, [*small, ("extra", oids.INT4, -1, 0)]]
    types = catalog(versions[0])
    reads: list[tuple[bool, int | None]] = []

    def derive(refresh: bool, attributes: int | None) -> PayloadCodec:
        reads.append((refresh, attributes))
        if refresh:  # what prepare_composite(refresh=True) does: the catalog as it is now
            types.add_composite_rows([EVENT], [(EVENT, *a) for a in versions[1]])
        return payload_codec(types, EVENT, where="outbox table shop.outbox, column p",
                             attributes=attributes)

    registry = Registry()
    payload = AvroPayload(derive, registry.register, "outbox table shop.outbox, column p")
    first = payload.encode("outbox.event.Order", "(1,a)")
    assert payload.encode("outbox.event.Order", None) is None  # NULL payload: null value
    second = payload.encode("outbox.event.Order", "(2,b,3)")
    assert reads == [(False, None), (True, None)]
    assert [t for t, _ in registry.subjects] == ["outbox.event.Order"] * 2
    assert decode(first or b"", registry.schema).value == {"id": 1, "note": "a"}
    assert decode(second or b"", registry.schema) == (2, {"id": 2, "note": "b", "extra": 3})
    # A value from before the ADD, decoded after it (pgcdc was behind): the first two
    # attributes of today's type, the version registered before (same id).
    old = payload.encode("outbox.event.Order", "(4,d)")
    assert decode(old or b"", registry.schema) == (1, {"id": 4, "note": "d"})
    assert reads[-2:] == [(True, None), (False, 2)]
    with pytest.raises(DecodeError, match="cannot tell which they are"):  # more than today
        payload.encode("outbox.event.Order", "(1,2,3,4)")


def test_a_value_older_than_a_dropped_attribute_stops_in_one_line() -> None:
    types = catalog(EVENT_ATTRS[:2])
    # today: id, (dropped), note: a 3-attribute value is from before the drop
    types.add_composite_rows([EVENT], [(EVENT, "id", oids.INT4, -1, 0, False),
                                       (EVENT, "gone", 0, -1, 0, True),
                                       (EVENT, "note", oids.TEXT, -1, 0, False)])
    payload = AvroPayload(lambda refresh, n: payload_codec(types, EVENT, where="p",
                                                           attributes=n),
                          Registry().register, "p")
    assert payload.current.datum("(1,x)") == {"id": 1, "note": "x"}
    with pytest.raises(DecodeError, match="attributes were dropped since it was written"):
        payload.encode("t", "(1,y,x)")


def test_a_nested_composite_altered_is_read_again() -> None:
    """ADD ATTRIBUTE to a nested type: the payload's own count is unchanged; the types are
    read again (as they are today) and the new version used."""
    types = catalog()
    attrs = [("id", oids.INT4, -1, 0), ("line", LINE, -1, 0)]
    types.add_composite_rows([EVENT], [(EVENT, *a) for a in attrs])

    def derive(refresh: bool, attributes: int | None) -> PayloadCodec:
        if refresh:
            types.add_composite_rows([LINE], [(LINE, *a) for a in
                                              [*LINE_ATTRS, ("note", oids.TEXT, -1, 0)]])
        return payload_codec(types, EVENT, where="p", attributes=attributes)

    registry = Registry()
    payload = AvroPayload(derive, registry.register, "p")
    value = payload.encode("t", '(1,"(s1,2,x)")')
    assert decode(value or b"", registry.schema).value == {
        "id": 1, "line": {"sku": "s1", "qty": 2, "note": "x"}}
