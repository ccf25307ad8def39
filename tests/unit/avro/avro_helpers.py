"""Relations and catalogs for the Avro unit tests (shared, not a test module)."""

from __future__ import annotations

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
