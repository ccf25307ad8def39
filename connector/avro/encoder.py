"""The control-topic records (messages, transaction markers, heartbeats) with registry ids.
Table events are written by the table codecs of `connector.avro.codecs.CodecFactory`.

    encoder = AvroEncoder(SchemaRegistry(url), prefix="shop", db="shopdb")
    record = encoder.message(msg, SourceInfo(...))     # -> Encoded(topic, key, value)
    record = encoder.transaction_begin(xid, commit_lsn, ts_ms)
    record = encoder.transaction_end(xid, commit_lsn, ts_ms, {"public.orders": 3})
    record = encoder.heartbeat(delivered_lsn, restart_lsn=slot_restart_lsn)
    record = encoder.drop(topic, "public", "orders", relation_id, seen_lsn, SourceInfo(...))

Schemas are registered when a record of their kind is first needed. Control topics:
``<prefix>.message`` (key: the message prefix, UTF-8), ``<prefix>.transaction`` (key: the
transaction id, UTF-8), ``<prefix>.heartbeat`` (no key); their values are Confluent-framed Avro
like every value.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from connector import __version__
from connector.pgoutput.messages import Message

from .envelope import SourceInfo
from .fastavro_io import framed_writer, parse_checked
from .fixed import fixed_schema
from .fixed_codec import FixedCodec
from .registry import SchemaRegistry, value_subject
from .schema import CONNECTOR, drop_schema, render

__all__ = ["AvroEncoder", "Encoded", "transaction_id"]

MESSAGE: Final = "pgcdc.Message"
HEARTBEAT: Final = "pgcdc.Heartbeat"
TRANSACTION: Final = "pgcdc.TransactionMetadata"


class Encoded(NamedTuple):
    """A record ready for `KafkaSink.produce`."""

    topic: str
    key: bytes | None
    value: bytes | None


def transaction_id(xid: int, commit_lsn: int) -> str:
    """The transaction id of the Envelope's transaction block and the transaction topic."""
    return f"{xid}:{commit_lsn}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AvroEncoder:
    """The fixed records, with their registry ids (registered on first use)."""

    def __init__(self, registry: SchemaRegistry, *, prefix: str, db: str) -> None:
        self.registry = registry
        self.prefix = prefix
        self.db = db
        self.message_topic = f"{prefix}.message"
        self.transaction_topic = f"{prefix}.transaction"
        self.heartbeat_topic = f"{prefix}.heartbeat"
        self._fixed: dict[str, FixedCodec] = {}

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

    def drop(self, topic: str, schema: str, table: str, relation_id: int, seen_lsn: int,
             source: SourceInfo, *, value_format: str = "pgcdc",
             truncate_records: str | None = None) -> Encoded | None:
        """The drop event of a table dropped upstream, for its table topic (a truncate under
        `drop_schema`); None when the topic never had an event (no value subject: nothing in
        it or in the lake to empty). `source`: the ``pgcdc.drop`` message's position."""
        if not self.registry.has_subject(value_subject(topic)):
            return None
        value_schema = drop_schema(self.prefix, schema, table, relation_id, seen_lsn,
                                   value_format=value_format, truncate_records=truncate_records)
        schema_id = self.registry.register_value(topic, render(value_schema))
        write = framed_writer(parse_checked(value_schema, f"drop event of {topic}"), schema_id)
        record: dict[str, Any] = {
            "before": None, "after": None, "op": "t", "ts_ms": _now_ms(), "transaction": None,
            "unchanged_toast": [], "unparsed": None,
            "source": {
                "version": __version__, "connector": CONNECTOR, "name": self.prefix,
                "ts_ms": source.ts_ms, "snapshot": "false", "db": self.db, "sequence": None,
                "schema": schema, "table": table, "txId": source.xid, "lsn": source.lsn,
                "xmin": None, "commit_lsn": source.commit_lsn, "txn_index": source.txn_index,
            },
        }
        return Encoded(topic, None, write(record))

    def prepare_heartbeats(self) -> None:
        """Register the heartbeat schema now, while the registry is known to answer (the
        session's start), not at the first heartbeat: a registry that falls silent later then
        pauses confirmation (sweep_gate.py) without stopping the producer."""
        self._codec(HEARTBEAT, self.heartbeat_topic)

    def heartbeat(self, lsn: int, *, restart_lsn: int | None = None,
                  ts_ms: int | None = None) -> Encoded:
        """A heartbeat for ``<prefix>.heartbeat``: `lsn` is the delivered LSN, `restart_lsn`
        the slot's restart_lsn when the heartbeat was emitted (None: not known)."""
        record = {"name": self.prefix, "db": self.db,
                  "ts_ms": _now_ms() if ts_ms is None else ts_ms, "lsn": lsn,
                  "restart_lsn": restart_lsn}
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
