"""Relations, catalogs and the contract's type table for the Avro unit tests."""

from __future__ import annotations

from typing import Any

from connector.pgoutput.messages import Relation, RelationColumn
from connector.pgtypes import TypeCatalog, oids

ENUM_OID = 50001
DOMAIN_OID = 50002  # domain over numeric(12,3)
DOMAIN_TEXT_OID = 50003  # domain over text
ENUM_ARRAY_OID = 50004


def numeric_typmod(precision: int, scale: int) -> int:
    return ((precision << 16) | (scale & 0xFFFF)) + 4


def catalog() -> TypeCatalog:
    cat = TypeCatalog()
    cat.register_enum(ENUM_OID, "mood", array_oid=ENUM_ARRAY_OID)
    cat.register_domain(DOMAIN_OID, oids.NUMERIC, name="amount",
                        base_typmod=numeric_typmod(12, 3))
    cat.register_domain(DOMAIN_TEXT_OID, oids.TEXT, name="label")
    return cat


def column(name: str, type_oid: int, typmod: int = -1, key: bool = False) -> RelationColumn:
    return RelationColumn(1 if key else 0, name, type_oid, typmod)


def relation(*columns: RelationColumn, schema: str = "public", table: str = "t",
             relation_id: int = 16384, identity: str = "d") -> Relation:
    return Relation(None, relation_id, schema, table, identity, tuple(columns))


def avro_shape(avro_type: Any) -> Any:
    """An Avro type without its Kafka Connect attributes (``connect.*``: names, types and
    parameters for Connect's AvroConverter, ignored by Avro): what the encoding depends on.
    A primitive left with no other attribute is its bare name (``{"type": "int"}``: "int")."""
    if isinstance(avro_type, list):
        return [avro_shape(branch) for branch in avro_type]
    if not isinstance(avro_type, dict):
        return avro_type
    plain = {k: avro_shape(v) for k, v in avro_type.items() if not k.startswith("connect.")}
    if list(plain) == ["type"] and isinstance(plain["type"], str):
        return plain["type"]
    return plain


JSON_STRING = "string"  # with connect.name io.debezium.data.Json

# (PostgreSQL type OID, typmod) -> the Avro type of schemas/README.md's table
CONTRACT: list[tuple[str, int, int, Any]] = [
    ("bool", oids.BOOL, -1, "boolean"),
    ("int2", oids.INT2, -1, "int"),
    ("int4", oids.INT4, -1, "int"),
    ("int8", oids.INT8, -1, "long"),
    ("oid", oids.OID, -1, "long"),
    ("float4", oids.FLOAT4, -1, "float"),
    ("float8", oids.FLOAT8, -1, "double"),
    ("numeric(10,2)", oids.NUMERIC, numeric_typmod(10, 2),
     {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
    ("numeric(38,0)", oids.NUMERIC, numeric_typmod(38, 0),
     {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}),
    ("numeric", oids.NUMERIC, -1, "string"),
    ("numeric(39,2)", oids.NUMERIC, numeric_typmod(39, 2), "string"),
    ("text", oids.TEXT, -1, "string"),
    ("varchar(20)", oids.VARCHAR, 24, "string"),
    ("bpchar(3)", oids.BPCHAR, 7, "string"),
    ("name", oids.NAME, -1, "string"),
    ('"char"', oids.CHAR, -1, "string"),
    ("xml", oids.XML, -1, "string"),
    ("inet", oids.INET, -1, "string"),
    ("cidr", oids.CIDR, -1, "string"),
    ("macaddr", oids.MACADDR, -1, "string"),
    ("macaddr8", oids.MACADDR8, -1, "string"),
    ("money", oids.MONEY, -1, "string"),
    ("bit(3)", oids.BIT, 3, "string"),
    ("varbit", oids.VARBIT, -1, "string"),
    ("timetz", oids.TIMETZ, -1, "string"),
    ("interval", oids.INTERVAL, -1, "string"),
    ("unknown type", 987654, -1, "string"),
    ("json", oids.JSON, -1, JSON_STRING),
    ("jsonb", oids.JSONB, -1, JSON_STRING),
    ("uuid", oids.UUID, -1, {"type": "string", "logicalType": "uuid"}),
    ("bytea", oids.BYTEA, -1, "bytes"),
    ("date", oids.DATE, -1, {"type": "int", "logicalType": "date"}),
    ("time", oids.TIME, -1, {"type": "long", "logicalType": "time-micros"}),
    ("timestamp", oids.TIMESTAMP, -1, {"type": "long", "logicalType": "local-timestamp-micros"}),
    ("timestamptz", oids.TIMESTAMPTZ, -1, {"type": "long", "logicalType": "timestamp-micros"}),
    ("enum", ENUM_OID, -1, "string"),
    ("domain over numeric(12,3)", DOMAIN_OID, -1,
     {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}),
    ("domain over text", DOMAIN_TEXT_OID, -1, "string"),
    ("int4[]", oids.ARRAY_OF[oids.INT4], -1, {"type": "array", "items": ["null", "int"]}),
    ("timestamptz[]", oids.ARRAY_OF[oids.TIMESTAMPTZ], -1,
     {"type": "array", "items": ["null", {"type": "long", "logicalType": "timestamp-micros"}]}),
    ("jsonb[]", oids.ARRAY_OF[oids.JSONB], -1, {"type": "array", "items": ["null", JSON_STRING]}),
    ("mood[]", ENUM_ARRAY_OID, -1, {"type": "array", "items": ["null", "string"]}),
]


def all_types_relation() -> Relation:
    """One table with a column of every CONTRACT type (the first one its key)."""
    return relation(*(column(f"c{i}", oid, typmod, key=(i == 0))
                      for i, (_, oid, typmod, _) in enumerate(CONTRACT)))


def copy_field(value: str | None) -> bytes:
    """What PostgreSQL's COPY TO writes for a text value (CopyAttributeOutText)."""
    if value is None:
        return b"\\N"
    out = value.replace("\\", "\\\\")
    for char, escape in (("\b", "\\b"), ("\f", "\\f"), ("\n", "\\n"), ("\r", "\\r"),
                         ("\t", "\\t"), ("\v", "\\v")):
        out = out.replace(char, escape)
    return out.encode()


def copy_line(row: tuple[str | None, ...]) -> bytes:
    """One COPY TO text line of `row`, without its newline."""
    return b"\t".join(copy_field(value) for value in row)

