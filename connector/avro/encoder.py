"""The pipeline's one entry point to Avro: codecs per table version, control-topic records.

    encoder = AvroEncoder(SchemaRegistry(url), catalog, prefix="shop", db="shopdb")
    codec = encoder.table(relation)               # derive + register once per Relation version
    key = codec.key_from_tuple(change.new)
    value = codec.value_from_tuples("c", None, change.new, SourceInfo(...))
    sink.produce(codec.topic, key, value, ticket)

    record = encoder.change(change)      # an assembler Change -> Encoded(topic, key, value, op)
    record = encoder.message(msg, SourceInfo(...))     # -> Encoded(topic, key, value)
    record = encoder.transaction_begin(xid, commit_lsn, ts_ms)
    record = encoder.transaction_end(xid, commit_lsn, ts_ms, {"public.orders": 3})
    record = encoder.heartbeat(confirmed_lsn)

Schemas are registered when a codec is first needed (a registry error raises `SchemaError`
before anything of that table version is produced). Control topics: ``<prefix>.message``
(key: the message prefix, UTF-8), ``<prefix>.transaction`` (key: the transaction id, UTF-8),
``<prefix>.heartbeat`` (no key); their values are Confluent-framed Avro like every value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from connector import __version__
from connector.assembler.transaction import Change
from connector.errors import SchemaError
from connector.pgoutput.lsn import lsn_to_str
from connector.pgoutput.messages import Delete, Insert, Message, Relation, TupleData, Update
from connector.pgoutput.timestamps import pg_timestamp_to_ms
from connector.pgtypes import TypeCatalog

from .fixed import fixed_schema
from .registry import SchemaRegistry
from .schema import derive_table_schemas, render
from .serializer import FixedCodec, SourceInfo, TableCodec, TransactionBlock

__all__ = ["AvroEncoder", "Encoded", "transaction_id"]

MESSAGE: Final = "pgcdc.Message"
HEARTBEAT: Final = "pgcdc.Heartbeat"
TRANSACTION: Final = "pgcdc.TransactionMetadata"


class Encoded(NamedTuple):
    """A record ready for `KafkaSink.produce`.

    `op` (from `AvroEncoder.change`): ``t`` must go to every partition
    (`KafkaSink.produce_to_all_partitions`), ``d`` may be followed by a tombstone
    (`KafkaSink.produce_delete`), ``m`` is a logical message for ``<prefix>.message``."""

    topic: str
    key: bytes | None
    value: bytes | None
    op: str | None = None


def transaction_id(xid: int, commit_lsn: int) -> str:
    """The transaction id of the Envelope's transaction block and the transaction topic."""
    return f"{xid}:{commit_lsn}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AvroEncoder:
    """Table codecs (cached per Relation version) and the fixed records, with registry ids."""

    def __init__(self, registry: SchemaRegistry, catalog: TypeCatalog, *, prefix: str,
                 db: str, array_dims: Callable[[Relation], Mapping[str, int]] | None = None,
                 key_columns: Callable[[Relation], Sequence[str] | None] | None = None) -> None:
        """`array_dims(relation)`: declared array dimensions by column name (see
        `ARRAY_DIMS_QUERY`); `key_columns(relation)`: columns to key a table by instead of its
        replica identity flags (None: the flags). Both are looked up once per Relation version
        by `change`; None means "no such information"."""
        self._array_dims = array_dims
        self._key_columns = key_columns
        self.registry = registry
        self.catalog = catalog
        self.prefix = prefix
        self.db = db
        self.message_topic = f"{prefix}.message"
        self.transaction_topic = f"{prefix}.transaction"
        self.heartbeat_topic = f"{prefix}.heartbeat"
        self._tables: dict[Any, TableCodec] = {}
        self._by_relation: dict[Relation, tuple[int, TableCodec]] = {}
        self._fixed: dict[str, FixedCodec] = {}

    # ------------------------------------------------------------------ tables

    def table(self, relation: Relation, *, array_dims: Mapping[str, int] | None = None,
              key_columns: Sequence[str] | None = None) -> TableCodec:
        """The codec of the table version a Relation describes (registers its schemas once)."""
        cache_key = (relation, self.catalog.generation,
                     tuple(sorted((array_dims or {}).items())),
                     None if key_columns is None else tuple(key_columns))
        codec = self._tables.get(cache_key)
        if codec is None:
            schemas = derive_table_schemas(relation, self.catalog, prefix=self.prefix, db=self.db,
                                           array_dims=array_dims, key_columns=key_columns)
            key_id = None
            if schemas.key_json is not None:
                key_id = self.registry.register_key(schemas.topic, schemas.key_json)
            value_id = self.registry.register_value(schemas.topic, schemas.value_json)
            codec = TableCodec(schemas, key_id, value_id, self.catalog)
            self._tables[cache_key] = codec
        return codec

    def change(self, change: Change, *, transaction: TransactionBlock | None = None,
               ts_ms: int | None = None) -> Encoded:
        """One assembler `Change` as its Kafka record (see `Encoded.op` for how to send it).

        Keys: insert and update use the new row, delete the old key/row, truncate none."""
        msg = change.message
        source = SourceInfo(commit_lsn=change.commit_lsn, txn_index=change.position,
                            ts_ms=pg_timestamp_to_ms(change.commit_timestamp), xid=change.xid,
                            lsn=change.wal_lsn)
        if isinstance(msg, Message):
            record = self.message(msg, source, ts_ms=ts_ms)
            return record._replace(op="m")
        relation = change.relation
        if relation is None:
            raise SchemaError(f"change at LSN {lsn_to_str(change.wal_lsn)} has no Relation")
        codec = self._codec_for(relation)
        op: str
        old: TupleData | None
        new: TupleData | None
        if isinstance(msg, Insert):
            op, old, new = "c", None, msg.new
        elif isinstance(msg, Update):
            op, old, new = "u", msg.old, msg.new
        elif isinstance(msg, Delete):
            op, old, new = "d", msg.old, None
        else:
            return Encoded(codec.topic, None,
                           codec.truncate(source, ts_ms=ts_ms, transaction=transaction), "t")
        key, value = codec.change_from_tuples(op, old, new, source, ts_ms=ts_ms,
                                              transaction=transaction)
        return Encoded(codec.topic, key, value, op)

    def _codec_for(self, relation: Relation) -> TableCodec:
        generation = self.catalog.generation
        cached = self._by_relation.get(relation)
        if cached is not None and cached[0] == generation:
            return cached[1]
        dims = self._array_dims(relation) if self._array_dims is not None else None
        keys = self._key_columns(relation) if self._key_columns is not None else None
        codec = self.table(relation, array_dims=dims, key_columns=keys)
        self._by_relation[relation] = (generation, codec)
        return codec

    # ------------------------------------------------------------------ fixed records

    def _codec(self, full_name: str, topic: str) -> FixedCodec:
        codec = self._fixed.get(full_name)
        if codec is None:
            schema_id = self.registry.register_value(topic, render(fixed_schema(full_name)))
            codec = self._fixed[full_name] = FixedCodec(full_name, schema_id)
        return codec

    def message(self, message: Message, source: SourceInfo, *,
                ts_ms: int | None = None) -> Encoded:
        """A logical decoding message for ``<prefix>.message`` (key: its prefix).

        `source`: transactional -- commit_lsn/txn_index as for a change; otherwise
        commit_lsn = the message's lsn and txn_index = 0."""
        record = {
            "op": "m",
            "ts_ms": _now_ms() if ts_ms is None else ts_ms,
            "prefix": message.prefix,
            "content": bytes(message.content),
            "transactional": message.transactional,
            "lsn": message.lsn,
            "source": {
                "version": __version__, "connector": "postgresql", "name": self.prefix,
                "ts_ms": source.ts_ms, "snapshot": source.snapshot, "db": self.db,
                "sequence": source.sequence, "schema": "", "table": "", "txId": source.xid,
                "lsn": message.lsn if source.lsn is None else source.lsn, "xmin": source.xmin,
                "commit_lsn": source.commit_lsn, "txn_index": source.txn_index,
            },
        }
        value = self._codec(MESSAGE, self.message_topic).encode(record)
        return Encoded(self.message_topic, message.prefix.encode(), value)

    def heartbeat(self, lsn: int, *, ts_ms: int | None = None) -> Encoded:
        """A heartbeat for ``<prefix>.heartbeat``: `lsn` is the flush LSN confirmed."""
        record = {"name": self.prefix, "db": self.db,
                  "ts_ms": _now_ms() if ts_ms is None else ts_ms, "lsn": lsn}
        return Encoded(self.heartbeat_topic, None,
                       self._codec(HEARTBEAT, self.heartbeat_topic).encode(record))

    def transaction_begin(self, xid: int, commit_lsn: int, ts_ms: int, *,
                          end_lsn: int | None = None) -> Encoded:
        """The BEGIN marker of a transaction for ``<prefix>.transaction``."""
        return self._marker("BEGIN", xid, commit_lsn, ts_ms, end_lsn, None)

    def transaction_end(self, xid: int, commit_lsn: int, ts_ms: int,
                        event_counts: Mapping[str, int], *,
                        end_lsn: int | None = None) -> Encoded:
        """The END marker; `event_counts`: events per ``"<schema>.<table>"``."""
        return self._marker("END", xid, commit_lsn, ts_ms, end_lsn, event_counts)

    def _marker(self, status: str, xid: int, commit_lsn: int, ts_ms: int, end_lsn: int | None,
                counts: Mapping[str, int] | None) -> Encoded:
        txn_id = transaction_id(xid, commit_lsn)
        record = {
            "status": status,
            "id": txn_id,
            "ts_ms": ts_ms,
            "xid": xid,
            "commit_lsn": commit_lsn,
            "end_lsn": end_lsn,
            "event_count": None if counts is None else sum(counts.values()),
            "data_collections": None if counts is None else [
                {"data_collection": name, "event_count": count}
                for name, count in counts.items()],
        }
        value = self._codec(TRANSACTION, self.transaction_topic).encode(record)
        return Encoded(self.transaction_topic, txn_id.encode(), value)
