"""Avro for change events: names, schemas derived from Relation messages, the fixed records,
the Schema Registry, and the Confluent wire format. See schemas/README.md for the contract.

    registry = SchemaRegistry(url)                                          # registry.py
    codecs = CodecFactory(types, catalog, registry_ids(registry), prefix="shop",
                          db="shopdb")                                      # codecs.py
    codec = codecs.codec(relation)                          # once per Relation version
    key, value = codec.change_from_tuples("c", None, new, source)        # table_codec.py
    encoder = AvroEncoder(registry, prefix="shop", db="shopdb")   # control topics: encoder.py
"""

from connector.names import from_avro_name, namespace_of, table_topic, to_avro_name, topic_part

from .codecs import CodecFactory, SchemaIds, SourceFacts, registry_ids
from .encoder import AvroEncoder, Encoded, transaction_id
from .envelope import SourceInfo, TransactionBlock
from .fastavro_io import Decoded, decode
from .fixed import fixed_schema, schemas_dir
from .fixed_codec import FixedCodec
from .registry import SchemaRegistry, key_subject, value_subject
from .schema import (
    ARRAY_DIMS_QUERY,
    ColumnSpec,
    TableSchemas,
    derive_table_schemas,
    render,
)
from .table_codec import TableCodec
from .wire import frame, unframe

__all__ = [
    "ARRAY_DIMS_QUERY",
    "AvroEncoder",
    "CodecFactory",
    "ColumnSpec",
    "Decoded",
    "Encoded",
    "FixedCodec",
    "SchemaIds",
    "SchemaRegistry",
    "SourceFacts",
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
    "registry_ids",
    "render",
    "schemas_dir",
    "table_topic",
    "to_avro_name",
    "topic_part",
    "transaction_id",
    "unframe",
    "value_subject",
]
