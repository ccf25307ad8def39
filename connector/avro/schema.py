"""Key and Envelope schemas of a table, derived from its Relation message (pure).

    schemas = derive_table_schemas(relation, catalog, prefix="shop", db="shopdb")
    schemas.topic          # "shop.public.orders"
    schemas.key_json       # None for a table without replica identity columns
    schemas.value_json     # the Envelope, exactly as schemas/README.md describes it

Names: record ``Key``, ``Envelope`` and ``Value`` in namespace ``<prefix>.<schema>.<table>``
(every component made an Avro name by `names.to_avro_name`); the fixed records keep their own
``pgcdc`` namespace (``pgcdc.Source``, ``pgcdc.Transaction``).

Determinism: the JSON text depends only on the Relation's names, column types and key flags
(and the prefix, array dimensions, key override, and what the Kafka Connect attributes carry:
the catalog's names of the column types and the columns' constant defaults), rendered
compactly with keys in a fixed
order, so the same Relation always gives byte-identical text and the registry dedupes it.

Evolution: every ``Value`` field is ``["null", T]`` with default null and the Envelope's
fields never change, so the schema of a Relation after ``ALTER TABLE ADD COLUMN`` or
``DROP COLUMN`` is BACKWARD compatible with the one before (readers with the new schema read
old events: added fields take their default, dropped fields are skipped) and FORWARD
compatible too. The one Envelope field added since the first release, ``unparsed``, has a
default (null) for the same reason: a table's schema with it is BACKWARD and FORWARD
compatible with the one registered before it (tests/integration/avro). A changed column
type or key is a new, possibly incompatible, schema, which a registry enforcing compatibility
may reject (`SchemaError`, the producer stops unconfirmed).

Key: the columns pgoutput flags as replica identity (flag 1): the primary key or the replica
identity index; with ``REPLICA IDENTITY FULL`` every column is flagged, so pass `key_columns`
(e.g. the primary key's columns) to key such tables by something narrower. No key columns:
no key schema and the record key is null. Key fields are nullable too (a FULL identity may
hold NULLs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from connector import __version__
from connector.errors import SchemaError
from connector.names import namespace_of, table_topic, to_avro_name
from connector.pgoutput.messages import Relation
from connector.pgtypes import TypeCatalog

from .connect import source_column_parameters
from .datums import ColumnCodec, Converter
from .fixed import fixed_schema
from .masking import ColumnMask, check_binary, masked_type
from .typemap import DEBEZIUM_FORMAT, column_codec

__all__ = ["ARRAY_DIMS_QUERY", "TRUNCATES", "VALUE_FORMAT", "ColumnSpec", "TableSchemas",
           "derive_table_schemas", "envelope_schema", "render"]

#: Array dimensions of a table's columns, for `derive_table_schemas(array_dims=...)`:
#: ``dict(conn.execute(ARRAY_DIMS_QUERY, [relation.relation_id]))``.
ARRAY_DIMS_QUERY: Final = (
    "SELECT attname::text, attndims::int FROM pg_catalog.pg_attribute "
    "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped AND attndims > 1"
)

CONNECTOR: Final = "postgresql"


def render(schema: Mapping[str, Any]) -> str:
    """The canonical text of a schema: compact JSON, keys in the order built, UTF-8 kept."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One column of a table as the Avro layer sees it."""

    index: int  # position in the Relation (and in every tuple of the table)
    pg_name: str
    avro_name: str
    type_oid: int
    type_modifier: int
    avro_type: Any  # the non-null type T of the field ["null", T]
    convert: Converter | None  # loaded value -> datum; None: identity
    key: bool
    # what the column's values become (connector/avro/masking.py); None: published as stored
    mask: ColumnMask | None = None


@dataclass(frozen=True, slots=True)
class TableSchemas:
    """Everything derived from one Relation (one schema version of a table)."""

    relation: Relation
    topic: str
    namespace: str
    columns: tuple[ColumnSpec, ...]
    key_columns: tuple[ColumnSpec, ...]
    key_schema: dict[str, Any] | None
    value_schema: dict[str, Any]
    key_json: str | None
    value_json: str
    source_constants: dict[str, Any]  # the Source fields fixed for this table


def _field(column: ColumnSpec) -> dict[str, Any]:
    return {"name": column.avro_name, "type": ["null", column.avro_type], "default": None,
            "pg_name": column.pg_name}


def _fields(columns: Sequence[ColumnSpec]) -> list[dict[str, Any]]:
    """The record fields of `columns`: a named type (Debezium's VariableScaleDecimal) is
    defined at its first use and referred to by its full name after (Avro allows one
    definition of a name per schema)."""
    defined: set[str] = set()
    return [{**field, "type": _once(field["type"], defined)}
            for field in (_field(c) for c in columns)]


def _once(avro_type: Any, defined: set[str]) -> Any:
    if isinstance(avro_type, list):
        return [_once(branch, defined) for branch in avro_type]
    if not isinstance(avro_type, dict):
        return avro_type
    if avro_type.get("type") == "record":
        full = f"{avro_type['namespace']}.{avro_type['name']}"
        if full in defined:
            return full
        defined.add(full)
        return avro_type
    if avro_type.get("type") == "array":
        return {**avro_type, "items": _once(avro_type["items"], defined)}
    return avro_type


def _columns(relation: Relation, catalog: TypeCatalog, array_dims: Mapping[str, int],
             key_names: set[str] | None, defaults: Mapping[str, str],
             masks: Mapping[str, ColumnMask], binary: bool,
             value_format: str) -> tuple[ColumnSpec, ...]:
    specs = []
    seen: dict[str, str] = {}
    for index, column in enumerate(relation.columns):
        avro_name = to_avro_name(column.name)
        if avro_name in seen:  # cannot happen: to_avro_name is injective
            raise SchemaError(f"columns {seen[avro_name]!r} and {column.name!r} of "
                              f"{relation.namespace}.{relation.name} share Avro name {avro_name}")
        seen[avro_name] = column.name
        codec: ColumnCodec = column_codec(catalog, column.type_oid, column.type_modifier,
                                          array_dims.get(column.name, 1),
                                          defaults.get(column.name), value_format)
        key = column.key if key_names is None else column.name in key_names
        mask = masks.get(column.name)
        if mask is not None:  # the one place a mask is chosen: type here, values in TableCodec
            check_binary(mask, catalog, column.type_oid, column.type_modifier,
                         f"{relation.namespace}.{relation.name}", column.name, binary)
            codec = ColumnCodec(masked_type(mask, codec.avro_type, source_column_parameters(
                catalog, column.type_oid, column.type_modifier)), None)
        specs.append(ColumnSpec(index, column.name, avro_name, column.type_oid,
                                column.type_modifier, codec.avro_type, codec.convert, key, mask))
    return tuple(specs)


# The Envelope's attribute naming the table's relation id (its pg_class oid).
RELATION_ID = "pgcdc.relation_id"
#: The Envelope's attributes of a topic written with ``--value-format debezium``: the format,
#: and where truncates are written (``truncate_records``; ``none`` by default in that format).
VALUE_FORMAT = "pgcdc.value_format"
TRUNCATES = "pgcdc.truncate_records"
#: The Envelope's attribute of a table's drop event (schemas/README.md "Dropped tables"): the
#: WAL position before which the dropped table was last seen existing.
DROPPED = "pgcdc.dropped_after_lsn"


def envelope_schema(namespace: str, value_fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The Envelope record of schemas/README.md around a Value record with these fields."""
    defined: set[str] = set()
    value_record = {"type": "record", "name": "Value", "namespace": namespace,
                    "fields": value_fields}
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": namespace,
        "fields": [
            {"name": "before", "type": ["null", value_record], "default": None},
            {"name": "after", "type": ["null", f"{namespace}.Value"], "default": None},
            {"name": "source", "type": fixed_schema("pgcdc.Source", defined=defined)},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
            {"name": "transaction",
             "type": ["null", fixed_schema("pgcdc.Transaction", defined=defined)],
             "default": None},
            {"name": "unchanged_toast", "type": {"type": "array", "items": "string"},
             "default": []},
            {"name": "unparsed", "type": ["null", {"type": "map", "values": "string"}],
             "default": None},
        ],
    }


def drop_schema(prefix: str, schema: str, table: str, relation_id: int, seen_lsn: int, *,
                value_format: str = "pgcdc", truncate_records: str | None = None
                ) -> dict[str, Any]:
    """The value schema of a dropped table's drop event: the Envelope with a Value record of
    no fields (the event is a truncate: `before` and `after` null, so no column is needed and
    none is guessed), the dropped table's relation id (`RELATION_ID`) and the position it was
    last seen at (`DROPPED`). Every field of a table's Value has a default, so a registry
    accepts it after the table's schemas and the next incarnation's after it, in every
    compatibility mode."""
    value_schema = envelope_schema(namespace_of(prefix, schema, table), [])
    value_schema[RELATION_ID] = relation_id
    value_schema[DROPPED] = seen_lsn
    if value_format == DEBEZIUM_FORMAT:
        value_schema[VALUE_FORMAT] = value_format
        value_schema[TRUNCATES] = truncate_records or "every-partition"
    return value_schema


def derive_table_schemas(relation: Relation, catalog: TypeCatalog, *, prefix: str, db: str,
                         array_dims: Mapping[str, int] | None = None,
                         key_columns: Sequence[str] | None = None,
                         defaults: Mapping[str, str] | None = None,
                         masks: Mapping[str, ColumnMask] | None = None,
                         excluded: Sequence[str] = (),
                         binary: bool = False, value_format: str = "pgcdc",
                         truncate_records: str | None = None) -> TableSchemas:
    """Key and value schemas of the table a Relation message describes.

    `catalog`: pgtypes' type catalog (knows enums/domains); `prefix`: the topic prefix; `db`:
    the database name (``source.db``); `array_dims`: declared dimensions of array columns by
    column name (`ARRAY_DIMS_QUERY`); `key_columns`: column names to key by instead of the
    replica identity flags (must exist in the table); `defaults`: the text of each column's
    constant default by column name (`connector.source_catalog.PostgresCatalog.column_defaults`),
    carried as the Kafka Connect default where its Avro type allows (`connect.connect_default`);
    `masks`: column name -> its mask (connector/avro/masking.py: the masked column's type);
    `excluded`: columns a mask excludes, which the Relation must not carry (refused if it does);
    `binary`: tuples come in binary format (a hash or truncate needing text is refused).
    `value_format`: ``pgcdc`` or ``debezium`` (`typemap.VALUE_FORMATS`): a Debezium-format
    Envelope names it (`VALUE_FORMAT`) and how truncates are written (`TRUNCATES`,
    `truncate_records`), which is all a reader needs to tell the formats apart.
    """
    if not prefix:
        raise SchemaError("the topic prefix must not be empty")
    key_names = None
    if key_columns is not None:
        key_names = set(key_columns)
        missing = key_names - {c.name for c in relation.columns}
        if missing:
            raise SchemaError(f"key columns {', '.join(sorted(missing))} are not columns of "
                              f"{relation.namespace}.{relation.name}")
    schema_name = relation.namespace or "pg_catalog"
    namespace = namespace_of(prefix, schema_name, relation.name)
    gone = sorted(set(masks or {}) - {c.name for c in relation.columns})
    if gone:  # renamed (or dropped) while running: publishing the new name in clear would leak
        raise SchemaError(f"table_settings mask names column(s) {', '.join(gone)} that "
                          f"{relation.namespace}.{relation.name} no longer publishes (renamed or "
                          "dropped?): update its mask in pgcdc.yaml and restart")
    sent = sorted(set(excluded) & {c.name for c in relation.columns})
    if sent:  # the publication sends a column the mask excludes: never publish it in clear
        raise SchemaError(f"table_settings mask excludes column(s) {', '.join(sent)} of "
                          f"{relation.namespace}.{relation.name}, but the publication publishes "
                          "them (changed while running?): leave them out of its column list "
                          "and restart")
    columns = _columns(relation, catalog, array_dims or {}, key_names, defaults or {},
                       masks or {}, binary, value_format)
    keys = tuple(c for c in columns if c.key)
    key_schema = None
    if keys:
        key_schema = {"type": "record", "name": "Key", "namespace": namespace,
                      "fields": _fields(keys)}
    value_schema = envelope_schema(namespace, _fields(columns))
    if relation.relation_id is not None:
        # Which table this is, not only its name: a table dropped and created again under
        # the same name has a new relation id, so consumers tell its events apart from the
        # old table's (the merge job starts the lake table again: spark_jobs/rules/incarnation.py).
        value_schema[RELATION_ID] = relation.relation_id
    if value_format == DEBEZIUM_FORMAT:  # pgcdc's own format has no marker (schemas unchanged)
        value_schema[VALUE_FORMAT] = value_format
        value_schema[TRUNCATES] = truncate_records or "every-partition"
    source_constants = {"version": __version__, "connector": CONNECTOR, "name": prefix,
                        "db": db, "schema": schema_name, "table": relation.name}
    return TableSchemas(
        relation=relation,
        topic=table_topic(prefix, schema_name, relation.name),
        namespace=namespace,
        columns=columns,
        key_columns=keys,
        key_schema=key_schema,
        value_schema=value_schema,
        key_json=None if key_schema is None else render(key_schema),
        value_json=render(value_schema),
        source_constants=source_constants,
    )
