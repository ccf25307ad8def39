"""Kafka records of one table topic → flattened change rows as Python dicts, without Spark.

The same rows `decode.decode_topic` makes as a DataFrame: the table's row columns (from
`after`, or `before` for a delete), named by `names.column_names`, plus `_cdc_op`,
`_cdc_commit_lsn`, `_cdc_txn_index`, `_cdc_ts_ms` and `_cdc_toast`. Values are the ones the
lake stores, in the form pyarrow builds the lake's Arrow types from: temporal values stay
the integers Avro carries (microseconds, days: `timestamp[us]` and `date32` take them
as they are, whatever the year), decimals are `Decimal`, uuids strings, time of day
microseconds (`lake_types`). The fast path (`delta/delta_rs_writer`) uses these; the Spark
path decodes with `from_avro`; a test runs both over the same events.

`decode_rows` decodes through the C extension when it is built and every writer schema of
the batch compiled for it (`row_program`), else with fastavro (the reference): the same rows
either way (tests run both)."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastavro import parse_schema, schemaless_reader

from ..rules.changes import IDX, LSN, OP, TOAST, TS
from ..rules.cut_policy import held, snapshot_row
from ..rules.names import column_names
from . import row_program
from .debezium import is_debezium
from .decode import value_record
from .lake_types import without_logical_types

# Kept by the decoder: everything else arrives as the plain Avro value (see module doc).
_DECODED_LOGICAL = frozenset({"decimal"})
# The producer writes none of these; a schema with one is left to the Spark path.
_UNSUPPORTED_LOGICAL = frozenset({"timestamp-millis", "local-timestamp-millis"})


class NotForRows(ValueError):
    """A writer schema or event this module does not turn into rows (the Spark path does)."""


def raw_schema(schema: Any) -> Any:
    """An Avro schema with every logical type but decimal removed (same binary encoding)."""
    def drop(logical: str) -> bool:
        if logical in _UNSUPPORTED_LOGICAL:
            raise NotForRows(f"logical type {logical}")
        return logical not in _DECODED_LOGICAL
    return without_logical_types(schema, drop)


@dataclass
class WriterSchema:
    """One writer schema of a topic, ready to decode: its parsed raw form, Avro field →
    column names, and its C decoder (None: fastavro decodes it)."""

    parsed: Any
    columns: dict[str, str]
    has_toast: bool
    decoder: row_program.RowDecoder | None = None

    @classmethod
    def of(cls, schema: dict[str, Any], original: bool) -> WriterSchema:
        if is_debezium(schema):  # its values need decoding back (debezium.py, Spark path)
            raise NotForRows("--value-format debezium")
        parsed = parse_schema(raw_schema(schema))
        columns = column_names(value_record(schema), original)
        has_toast = any(f["name"] == "unchanged_toast" for f in schema["fields"])
        return cls(parsed, columns, has_toast,
                   row_program.row_decoder(parsed, columns, has_toast))


@dataclass
class TopicRows:
    """One topic's decoded changes of a batch."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # row columns, first seen first
    truncates: int = 0
    deletes: int = 0
    toast: set[str] = field(default_factory=set)  # columns some change named unchanged


def decode_rows(records: Iterable[tuple[int, bytes]], schemas: Mapping[int, WriterSchema]
                ) -> TopicRows:
    """(schema id, Avro body) of each decodable record → TopicRows. Raises NotForRows for a
    body its schema cannot read (the Spark path dead-letters it)."""
    batch = list(records)
    out = TopicRows()
    used = dict.fromkeys(sid for sid, _ in batch)  # the schema ids seen, first seen first
    fast = row_program.decode(batch, {sid: schemas[sid].decoder for sid in used})
    if fast is not None:
        out.rows, out.truncates, out.deletes, out.toast = fast
    else:
        _decode_python(batch, schemas, out)
    # Per schema id, not per record: the row columns, first seen first.
    out.columns = list(dict.fromkeys(c for sid in used for c in schemas[sid].columns.values()))
    return out


def _decode_python(records: Iterable[tuple[int, bytes]], schemas: Mapping[int, WriterSchema],
                   out: TopicRows) -> None:
    """`decode_rows` with fastavro, the reference: the rows into `out`."""
    for sid, body in records:
        writer = schemas[sid]
        try:
            event = schemaless_reader(io.BytesIO(body), writer.parsed, None)
        except Exception as exc:  # noqa: BLE001 - any decoding failure: leave it to Spark
            raise NotForRows(f"undecodable body for schema id {sid}") from exc
        assert isinstance(event, dict)
        out.rows.append(flatten(event, writer))
        op = event["op"]
        out.truncates += op == "t"
        out.deletes += op == "d"
    for row in out.rows:
        out.toast.update(row[TOAST])


def flatten(event: dict[str, Any], writer: WriterSchema) -> dict[str, Any]:
    """One decoded Envelope → its flattened row (see module doc)."""
    image = event["after"] if event["after"] is not None else event["before"]
    row = {column: (image or {}).get(avro) for avro, column in writer.columns.items()}
    toast: Sequence[str] = (event.get("unchanged_toast") or []) if writer.has_toast else []
    source = event["source"]
    row.update({OP: event["op"], LSN: source["commit_lsn"], IDX: source["txn_index"],
                TS: source["ts_ms"], TOAST: [writer.columns.get(n, n) for n in toast]})
    return row


def split_held(batch: TopicRows, bound: int | None) -> tuple[TopicRows, list[int]]:
    """(the rows a batch applies, the indexes of the rows it holds back) under a consistent
    cut's bound (`cut_policy.held`); `rows[i]` is the
    i-th record given to `decode_rows`, so an index names its Kafka record."""
    keep = TopicRows(columns=batch.columns)
    waiting: list[int] = []
    for i, row in enumerate(batch.rows):
        if held(row[LSN], bound, snapshot_row(row[OP], row[IDX])):
            waiting.append(i)
            continue
        keep.rows.append(row)
        keep.truncates += row[OP] == "t"
        keep.deletes += row[OP] == "d"
        keep.toast.update(row[TOAST])
    return keep, waiting
