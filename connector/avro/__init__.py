"""Avro for change events: names, schemas derived from Relation messages, the fixed records,
the Schema Registry, and the Confluent wire format. See schemas/README.md for the contract.

    registry = SchemaRegistry(url)                                  # registry.py
    encoder = AvroEncoder(registry, catalog, prefix="shop", db="shopdb")   # encoder.py
    codec = encoder.table(relation)                                 # once per Relation version
    key, value = codec.key_from_tuple(new), codec.value_from_tuples("c", None, new, source)
"""

from connector.names import from_avro_name, namespace_of, table_topic, to_avro_name, topic_part

from .encoder import AvroEncoder, Encoded, transaction_id
from .fixed import fixed_schema, schemas_dir
from .registry import SchemaRegistry, key_subject, value_subject
from .schema import (
    ARRAY_DIMS_QUERY,
    ColumnSpec,
    TableSchemas,
    derive_table_schemas,
    render,
)
from .serializer import (
    Decoded,
    FixedCodec,
    SourceInfo,
    TableCodec,
    TransactionBlock,
    decode,
    frame,
    parse_frame,
)

__all__ = [
    "ARRAY_DIMS_QUERY",
    "AvroEncoder",
    "ColumnSpec",
    "Decoded",
    "Encoded",
    "FixedCodec",
    "SchemaRegistry",
    "SourceInfo",
    "TableCodec",
    "TableSchemas",
    "TransactionBlock",
    "decode",
    "derive_table_schemas",
    "fixed_schema",
    "frame",
    "from_avro_name",
    "key_subject",
    "namespace_of",
    "parse_frame",
    "render",
    "schemas_dir",
    "table_topic",
    "to_avro_name",
    "topic_part",
    "transaction_id",
    "value_subject",
]
