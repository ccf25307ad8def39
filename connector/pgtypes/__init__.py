"""PostgreSQL type OID -> Python value, for pgoutput's text and binary tuple formats. Pure: no
IO, and no output format: the Avro type of each is `connector.avro.typemap`'s (which also
holds the "adding a type" checklist).

Typical use, once per Relation message::

    catalog = TypeCatalog()                       # built-ins known; one per replication stream
    catalog.register_type_message(oid, ns, name)  # for each pgoutput Type message
    missing = catalog.needs_lookup(c.type_oid for c in relation.columns)
    if missing:                                   # at the IO edge, on a normal connection:
        catalog.add_rows(conn.execute(CATALOG_QUERY, [missing]))
    loaders = catalog.row_loaders(relation.columns)
    ...
    value = loaders.text[i](raw)      # tuple kind 't' (raw: str)
    value = loaders.binary[i](raw)    # tuple kind 'b' (raw: bytes)

A malformed value raises :class:`connector.errors.DecodeError`, never anything else.
"""

from __future__ import annotations

from . import oids
from ._base import BinaryLoader, TextLoader
from .catalog import (
    CATALOG_QUERY,
    COMPOSITE_QUERY,
    ColumnType,
    Composite,
    CompositeAttribute,
    PgType,
    ResolvedType,
    RowLoaders,
    TypeCatalog,
    TypeKind,
)
from .jsonable import to_jsonable
from .numeric import numeric_precision_scale
from .values import (
    INFINITY,
    INTERVAL_INFINITY,
    INTERVAL_NEG_INFINITY,
    NEG_INFINITY,
    Infinity,
    Interval,
    OutOfRange,
    Unknown,
)

__all__ = [
    "CATALOG_QUERY",
    "COMPOSITE_QUERY",
    "INFINITY",
    "INTERVAL_INFINITY",
    "INTERVAL_NEG_INFINITY",
    "NEG_INFINITY",
    "BinaryLoader",
    "ColumnType",
    "Composite",
    "CompositeAttribute",
    "Infinity",
    "Interval",
    "OutOfRange",
    "PgType",
    "ResolvedType",
    "RowLoaders",
    "TextLoader",
    "TypeCatalog",
    "TypeKind",
    "Unknown",
    "numeric_precision_scale",
    "oids",
    "to_jsonable",
]
