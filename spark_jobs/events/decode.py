"""Decode one micro-batch: writer schema per (topic, schema id), `from_avro` on the body,
flattened to row columns + change metadata. What cannot be decoded becomes dead-letter rows."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import DataType

from ..rules.changes import IDX, LSN, OP, TOAST, TS, q
from ..rules.incarnation import drop_of
from ..rules.names import OFFSET, PARTITION, column_names
from ..rules.widening import batch_type, exact_cast
from . import debezium
from .lake_types import lake_schema
from .registry import SchemaCache, SchemaLookupError
from .wire import BODY, KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID

DEAD_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "reason")


class NotAnEnvelope(ValueError):
    pass


@dataclass
class TopicPlan:
    """What one topic's rows in a batch need: the decodable writer schemas, the rejected ids
    with their reasons, and the key record (the newest key schema seen)."""

    schemas: dict[int, dict[str, Any]] = field(default_factory=dict)
    rejected: dict[int, str] = field(default_factory=dict)
    key_record: dict[str, Any] | None = None
    key_schema_id: int = -1
    events: int = 0
    framing_problems: int = 0
    # Key schema ids of the decodable events (None: a null Kafka key, no replica identity)
    # → their key records (None when unknown or keyless).
    keys: dict[int | None, dict[str, Any] | None] = field(default_factory=dict)

    def key_columns(self, original: bool = False, key_sid: int | None = -1
                    ) -> list[str] | None:
        """The key columns of the events written with key schema `key_sid` (default: the
        newest one of the batch), named like the table's other columns: by the newest value
        record (`column_names` of the key record alone could name a column otherwise, when its
        name is only taken in the whole row, e.g. `_x005Fcdc_x005Fop` next to `_cdc_op`)."""
        record = self.key_record if key_sid == -1 else self.keys.get(key_sid)
        if record is None:
            return None
        own = column_names(record, original)
        # A drop event's schema names no column (`rules/incarnation.py`, drops).
        changes = [sid for sid, schema in self.schemas.items() if drop_of(schema) is None]
        row = (column_names(value_record(self.schemas[max(changes)]), original)
               if changes else {})
        return [row.get(avro, name) for avro, name in own.items()]


def _record(schema: Any, named: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Resolve a field type (union/named reference) to its record definition, if any."""
    if isinstance(schema, list):
        for branch in schema:
            found = _record(branch, named)
            if found is not None:
                return found
        return None
    if isinstance(schema, dict) and schema.get("type") == "record":
        named[schema["name"]] = schema
        if "namespace" in schema:
            named[f"{schema['namespace']}.{schema['name']}"] = schema
        return schema
    if isinstance(schema, str):
        return named.get(schema) or named.get(schema.rsplit(".", 1)[-1])
    return None


def value_record(envelope: dict[str, Any]) -> dict[str, Any]:
    """The `Value` record of an Envelope schema (defined in `before` or `after`)."""
    fields = {f["name"]: f for f in envelope.get("fields", [])} if envelope.get(
        "type") == "record" else {}
    if not {"before", "after", "source", "op"} <= fields.keys():
        raise NotAnEnvelope("not a pgcdc change event (Envelope) schema")
    named: dict[str, dict[str, Any]] = {}
    for name in ("before", "after"):
        found = _record(fields[name]["type"], named)
        if found is not None and name == "after":
            return found
    raise NotAnEnvelope("Envelope without a Value record")


def plan_batch(summary: list[Any], cache: SchemaCache, control: Collection[str] = ()
               ) -> dict[str, TopicPlan]:
    """From the batch summary rows (topic, problem, sid, key_sid, n), per topic: fetch each
    writer schema once (cached across batches) and sort ids into decodable and rejected.
    `control`: subscribed topics that are no table (the heartbeat topic of --consistent-cuts)."""
    plans: dict[str, TopicPlan] = defaultdict(TopicPlan)
    cache.prefetch(int(row[sid]) for row in summary if row[PROBLEM] is None
                   for sid in (SCHEMA_ID, KEY_SCHEMA_ID) if row[sid] is not None)
    for row in summary:
        if row["topic"] in control:
            continue
        plan = plans[row["topic"]]
        plan.events += row["n"]
        if row[PROBLEM] is not None:
            plan.framing_problems += row["n"]
            continue
        sid = int(row[SCHEMA_ID])
        if sid not in plan.schemas and sid not in plan.rejected:
            try:
                schema = cache.get(sid)
                value_record(schema)
                plan.schemas[sid] = schema
                debezium.note_truncates(row["topic"], schema)
            except (SchemaLookupError, NotAnEnvelope) as exc:
                plan.rejected[sid] = f"schema id {sid}: {exc}" if isinstance(
                    exc, NotAnEnvelope) else str(exc)
        key_sid = None if row[KEY_SCHEMA_ID] is None else int(row[KEY_SCHEMA_ID])
        if key_sid not in plan.keys:
            try:
                plan.keys[key_sid] = None if key_sid is None else cache.get(key_sid)
            except SchemaLookupError:
                plan.keys[key_sid] = None  # keys are only read for their column names
        if key_sid is not None and key_sid > plan.key_schema_id and plan.keys[key_sid]:
            plan.key_record = plan.keys[key_sid]
            plan.key_schema_id = key_sid
    return dict(plans)


def _flatten(decoded: Column, schema: dict[str, Any], original: bool) -> list[Column]:
    """Row columns (from `after`, or `before` for a delete) + metadata, named per the table."""
    record = value_record(schema)
    mapping = column_names(record, original)
    row = F.coalesce(decoded["after"], decoded["before"])
    if debezium.is_debezium(schema):  # Debezium's encodings back to the lake's types
        types = {f["name"]: f["type"] for f in record["fields"]}
        values = [debezium.lake_column(row[a], types[a]).alias(c) for a, c in mapping.items()]
    else:
        values = [row[a].alias(c) for a, c in mapping.items()]
    has_toast = any(f["name"] == "unchanged_toast" for f in schema["fields"])
    toast: Column = decoded["unchanged_toast"] if has_toast else F.array().cast("array<string>")
    if has_toast and any(a != c for a, c in mapping.items()):
        names = F.create_map(*[F.lit(x) for pair in mapping.items() for x in pair])
        toast = F.transform(toast, lambda n: F.coalesce(F.element_at(names, n), n))
    return [
        *values,
        decoded["op"].alias(OP),
        decoded["source"]["commit_lsn"].alias(LSN),
        decoded["source"]["txn_index"].alias(IDX),
        decoded["source"]["ts_ms"].alias(TS),
        toast.alias(TOAST),
    ]


def decode_topic(frames: DataFrame, topic: str, plan: TopicPlan, original: bool = False
                 ) -> DataFrame:
    """Decoded changes of one topic, one `from_avro` per writer schema, unioned by column name
    (a column missing from a schema — added later or dropped — is NULL there). A body Avro
    cannot read leaves every column NULL and `_cdc_op` NULL: see `split_corrupt`.
    `original`: columns take the PostgreSQL names (a table with column mapping).

    The columns are the row columns and the job's `names.METADATA_COLUMNS` (Kafka partition
    and offset included) only, and no row column takes one of those names: a table's columns
    may be called `key`, `topic`, `_cdc_op`... (the Kafka record's other fields stay in
    `frames`)."""
    parts = []
    for sid, schema in sorted(plan.schemas.items()):
        rows = frames.where((F.col("topic") == topic) & (F.col(SCHEMA_ID) == sid)
                            & F.col(PROBLEM).isNull())
        reader = debezium.lake_schema(schema) if debezium.is_debezium(schema) else schema
        decoded = from_avro(F.col(BODY), json.dumps(lake_schema(reader)), {"mode": "PERMISSIVE"})
        # Two projections (Spark evaluates from_avro once per row); the second lists every
        # column it keeps, so the struct's name never meets a row column's.
        parts.append(rows.select(
            F.col("partition").alias(PARTITION), F.col("offset").alias(OFFSET),
            decoded.alias("_e"),
        ).select(PARTITION, OFFSET, *_flatten(F.col("_e"), schema, original)))
    return _union(parts[::-1]) if len(parts) > 1 else parts[0]


def _union(newest_first: list[DataFrame]) -> DataFrame:
    """The parts of several writer schemas unioned by name, each column of the type the
    newest schema having it gives it (`widening.batch_type`): an older schema's values are
    cast exactly where they can be and NULL otherwise (a column retyped text → bigint has
    'foo' in its older events), never failing the batch."""
    types: dict[str, DataType] = {}
    for part in newest_first:
        for f in part.schema.fields:
            types[f.name] = (f.dataType if f.name not in types
                             else batch_type(types[f.name], f.dataType))
    cast = [part.select(*[exact_cast(F.col(q(f.name)), f.dataType, types[f.name]).alias(f.name)
                          if f.dataType != types[f.name] else F.col(q(f.name))
                          for f in part.schema.fields])
            for part in newest_first]
    out = cast[-1]  # oldest first, as before
    for part in cast[-2::-1]:
        out = out.unionByName(part, allowMissingColumns=True)
    return out


def split_corrupt(decoded: DataFrame, frames: DataFrame, topic: str
                  ) -> tuple[DataFrame, DataFrame]:
    """(changes, dead-letter rows) of one topic's `decode_topic` output. A valid event always
    has an op; a corrupt one's Kafka record is found again in `frames` by partition and
    offset."""
    corrupt = decoded.where(F.col(OP).isNull()).select(
        F.col(PARTITION).alias("partition"), F.col(OFFSET).alias("offset"))
    dead = (frames.where(F.col("topic") == topic)
            .join(corrupt, ["partition", "offset"], "left_semi")
            .select(*DEAD_COLUMNS[:-1],
                    F.lit("corrupt Avro body for its writer schema").alias("reason")))
    good = decoded.where(F.col(OP).isNotNull())
    return good, dead


def undecodable(frames: DataFrame, plans: dict[str, TopicPlan]) -> DataFrame | None:
    """Dead-letter rows found before decoding: bad framing, unknown or unusable schema ids."""
    reasons = F.col(PROBLEM)
    for plan in plans.values():
        for sid, reason in plan.rejected.items():
            reasons = F.when(F.col(SCHEMA_ID) == sid, F.lit(reason)).otherwise(reasons)
    if not any(p.framing_problems or p.rejected for p in plans.values()):
        return None
    return (frames.withColumn("reason", reasons).where(F.col("reason").isNotNull())
            .select(*DEAD_COLUMNS))
