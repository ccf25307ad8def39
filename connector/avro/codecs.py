"""Relation -> `TableCodec`: the one way a table's codec is made, for the stream and the snapshot.

    codecs = CodecFactory(types, PostgresCatalog(conn, types), registry_ids(registry),
                          prefix="shop", db="shopdb")
    codec = codecs.codec(relation)          # built once per Relation version, then cached
    key, value = codec.change_from_tuples("c", None, insert.new, SourceInfo(...))

In:
- a `Relation`: pgoutput's message, or the one the snapshot builds from the catalog;
- the catalog facts pgoutput does not carry, asked of `facts` (`SourceFacts`, e.g.
  `connector.source_catalog.PostgresCatalog`) once per Relation version, in this order:
  `prepare_types` (loads enums, domains, array and composite types into the `TypeCatalog`),
  `array_dims` (declared dimensions of array columns), `key_columns` (columns to key by instead
  of the replica identity flags; None: the flags), `column_defaults` (the text of each
  column's constant default: the Kafka Connect default, schemas/README.md). No `facts`: the
  catalog as it is, the flags, one-dimensional arrays, no defaults;
- naming: the topic prefix and the database name (``source.db``), see schemas/README.md;
- `masking`: the column masks of table_settings (connector/avro/masking.py), applied by every
  codec it makes: the stream's and both snapshots' (so they agree on every masked value).
- the value format (``pgcdc``, or ``debezium``: connector/avro/debezium_types.py) and, named in a
  Debezium-format Envelope for the merge job, how truncates are written.

Out: the `TableCodec` of that table version (schemas derived by `derive_table_schemas`), with
the registry ids `ids(schemas)` gives: `registry_ids(registry)` registers the key and value
subjects (the stream, the snapshot's coordinator); a snapshot reader passes the ids its
coordinator registered (connector/snapshot/initial/workers.py) and makes no registry call.

A registry or catalog error raises before the codec exists, so nothing of a table version is
produced without its schemas registered. The cache is per Relation value: the same message
(same names, types, flags) is the same table version, so the same codec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from connector.pgoutput.messages import Relation
from connector.pgtypes import TypeCatalog

from .masking import Masking
from .registry import SchemaRegistry
from .schema import TableSchemas, derive_table_schemas
from .table_codec import TableCodec

__all__ = ["CodecFactory", "SchemaIds", "SourceFacts", "registry_ids"]

#: (key id or None, value id) of a table version's schemas.
SchemaIds = Callable[[TableSchemas], tuple[int | None, int]]


class SourceFacts(Protocol):
    """What a codec needs to know about a table beyond its Relation message."""

    def prepare_types(self, relation: Relation) -> None: ...

    def prepare_composite(self, type_oid: int, *, refresh: bool = False) -> None:
        """Read a composite type's attributes (and their types) into the catalog: an outbox
        payload's (connector/avro/payload.py); `refresh`: again, after ALTER TYPE."""
        ...

    def array_dims(self, relation: Relation) -> Mapping[str, int]: ...

    def key_columns(self, relation: Relation) -> Sequence[str] | None: ...

    def column_defaults(self, relation: Relation) -> Mapping[str, str]: ...


def registry_ids(registry: SchemaRegistry) -> SchemaIds:
    """Ids by registering the key (when the table has one) and the value schema."""

    def register(schemas: TableSchemas) -> tuple[int | None, int]:
        key_id = None
        if schemas.key_json is not None:
            key_id = registry.register_key(schemas.topic, schemas.key_json)
        return key_id, registry.register_value(schemas.topic, schemas.value_json)

    return register


class CodecFactory:
    """Table codecs per Relation version (see the module docstring)."""

    def __init__(self, types: TypeCatalog, facts: SourceFacts | None, ids: SchemaIds, *,
                 prefix: str, db: str, masking: Masking | None = None,
                 value_format: str = "pgcdc", truncate_records: str | None = None) -> None:
        self.types = types
        self.masking = masking
        self.value_format = value_format  # typemap.VALUE_FORMATS
        self.truncate_records = truncate_records  # named in a Debezium-format Envelope
        self.facts = facts
        self.prefix = prefix
        self.db = db
        self._ids = ids
        self._codecs: dict[Relation, TableCodec] = {}

    def codec(self, relation: Relation) -> TableCodec:
        """The codec of the table version `relation` describes (built on first use)."""
        codec = self._codecs.get(relation)
        if codec is None:
            codec = self._codecs[relation] = self._build(relation)
        return codec

    def _build(self, relation: Relation) -> TableCodec:
        array_dims: Mapping[str, int] | None = None
        key_columns: Sequence[str] | None = None
        defaults: Mapping[str, str] | None = None
        if self.facts is not None:
            self.facts.prepare_types(relation)  # first: the schema needs the column types
            array_dims = self.facts.array_dims(relation)
            key_columns = self.facts.key_columns(relation)
            defaults = self.facts.column_defaults(relation)
        masking = self.masking
        schemas = derive_table_schemas(
            relation, self.types, prefix=self.prefix, db=self.db, array_dims=array_dims,
            key_columns=key_columns, defaults=defaults,
            masks=None if masking is None else masking.for_table(relation.namespace or
                                                                 "pg_catalog", relation.name),
            excluded=() if masking is None else masking.excluded_for(
                relation.namespace or "pg_catalog", relation.name),
            binary=masking is not None and masking.binary, value_format=self.value_format,
            truncate_records=self.truncate_records)
        key_id, value_id = self._ids(schemas)
        return TableCodec(schemas, key_id, value_id, self.types)
