"""Change events in the contract's format (schemas/README.md), for tests, benchmarks and demos:
Envelope/Key schemas for a table, registered in the registry, Avro bodies behind the
Confluent header. The producer (`connector/`) is the real writer; this is the same format."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from connector.avro.fixed import schemas_dir
from connector.names import table_topic

from .wire import frame_bytes

SOURCE_AVSC = schemas_dir() / "source.avsc"
Column = tuple[str, Any]  # (column name, Avro type of its non-null branch)


def source_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SOURCE_AVSC.read_text())
    return loaded


_VALID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPE = re.compile(r"_x[0-9A-F]{4}|_u[0-9A-F]{6}")


def avro_name(pg_name: str) -> str:
    """The contract's reversible name encoding (schemas/README.md, "Names")."""
    if _VALID.fullmatch(pg_name) and not _ESCAPE.search(pg_name):
        return pg_name
    out = []
    for i, ch in enumerate(pg_name):
        if ("a" <= ch.lower() <= "z") or (ch.isascii() and ch.isdigit() and i > 0):
            out.append(ch)
        else:
            out.append(f"_x{ord(ch):04X}" if ord(ch) <= 0xFFFF else f"_u{ord(ch):06X}")
    return "".join(out)


def _record(name: str, namespace: str, columns: Sequence[Column]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": namespace,
            "fields": [{"name": avro_name(c), "type": ["null", t], "default": None, "pg_name": c}
                       for c, t in columns]}


def namespace(prefix: str, schema: str, table: str) -> str:
    return ".".join(avro_name(p) for p in [*prefix.split("."), schema, table])


def envelope_schema(prefix: str, schema: str, table: str,
                    columns: Sequence[Column]) -> dict[str, Any]:
    ns = namespace(prefix, schema, table)
    return {
        "type": "record", "name": "Envelope", "namespace": ns,
        "fields": [
            {"name": "before", "type": ["null", _record("Value", ns, columns)], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "source", "type": source_schema()},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
            {"name": "transaction", "default": None, "type": ["null", {
                "type": "record", "name": "Transaction", "namespace": "pgcdc",
                "fields": [{"name": "id", "type": "string"},
                           {"name": "total_order", "type": "long"},
                           {"name": "data_collection_order", "type": "long"}]}]},
            {"name": "unchanged_toast", "type": {"type": "array", "items": "string"},
             "default": []},
        ],
    }


def key_schema(prefix: str, schema: str, table: str, columns: Sequence[Column]) -> dict[str, Any]:
    rec = _record("Key", namespace(prefix, schema, table), columns)
    for f in rec["fields"]:
        f["type"] = f["type"][1]  # key columns are NOT NULL
        del f["default"]
    return rec


def source(schema: str, table: str, commit_lsn: int, txn_index: int, *, ts_ms: int,
           prefix: str = "pgcdc", snapshot: str = "false") -> dict[str, Any]:
    return {"version": "test", "connector": "postgresql", "name": prefix, "ts_ms": ts_ms,
            "snapshot": snapshot, "db": "postgres", "sequence": None, "schema": schema,
            "table": table, "txId": None, "lsn": commit_lsn, "xmin": None,
            "commit_lsn": commit_lsn, "txn_index": txn_index}


@dataclass
class TableTopic:
    """A table's topic with its registered schemas; encodes keys and values."""

    prefix: str
    schema: str
    table: str
    key_columns: list[str]
    value_id: int
    key_id: int | None
    _value: Any
    _key: Any | None

    @property
    def topic(self) -> str:
        return table_topic(self.prefix, self.schema, self.table)

    def envelope(self, op: str, commit_lsn: int, txn_index: int, *,
                 before: Mapping[str, Any] | None = None,
                 after: Mapping[str, Any] | None = None,
                 unchanged_toast: Sequence[str] = (), ts_ms: int = 1_700_000_000_000
                 ) -> dict[str, Any]:
        return {"before": before, "after": after, "op": op, "ts_ms": ts_ms, "transaction": None,
                "source": source(self.schema, self.table, commit_lsn, txn_index, ts_ms=ts_ms,
                                 prefix=self.prefix, snapshot="true" if op == "r" else "false"),
                "unchanged_toast": list(unchanged_toast)}

    def value(self, envelope: Mapping[str, Any]) -> bytes:
        """Encode an envelope whose rows are keyed by column (PostgreSQL) names."""
        envelope = {**envelope, "before": self._avro_row(envelope.get("before")),
                    "after": self._avro_row(envelope.get("after")),
                    "unchanged_toast": [avro_name(c) for c in envelope.get("unchanged_toast", [])]}
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, self._value, envelope)
        return frame_bytes(self.value_id, buf.getvalue())

    def key(self, row: Mapping[str, Any] | None) -> bytes | None:
        if row is None or self._key is None or self.key_id is None:
            return None
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, self._key, {avro_name(k): row[k]
                                                    for k in self.key_columns})
        return frame_bytes(self.key_id, buf.getvalue())

    @staticmethod
    def _avro_row(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if row is None else {avro_name(k): v for k, v in row.items()}

    def change(self, op: str, commit_lsn: int, txn_index: int, *,
               before: Mapping[str, Any] | None = None, after: Mapping[str, Any] | None = None,
               unchanged_toast: Sequence[str] = ()) -> tuple[bytes | None, bytes]:
        """(key, value) of one change; the key from `after`, or `before` for a delete."""
        value = self.value(self.envelope(op, commit_lsn, txn_index, before=before, after=after,
                                         unchanged_toast=unchanged_toast))
        return self.key(after if after is not None else before), value


def register_table(registry: SchemaRegistryClient, prefix: str, schema: str, table: str,
                   columns: Sequence[Column], key: Sequence[str]) -> TableTopic:
    """Register `<topic>-value` (and `-key`) and return the encoder. Registering again with
    other columns is a schema change: a new writer schema id."""
    topic = table_topic(prefix, schema, table)
    value = envelope_schema(prefix, schema, table, columns)
    value_id = registry.register_schema(f"{topic}-value", Schema(json.dumps(value), "AVRO"))
    key_id = parsed_key = None
    if key:
        types = dict(columns)
        k = key_schema(prefix, schema, table, [(c, types[c]) for c in key])
        key_id = registry.register_schema(f"{topic}-key", Schema(json.dumps(k), "AVRO"))
        parsed_key = fastavro.parse_schema(k)
    return TableTopic(prefix, schema, table, list(key), value_id, key_id,
                      fastavro.parse_schema(value), parsed_key)
