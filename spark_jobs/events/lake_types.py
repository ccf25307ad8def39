"""The lake's type for each Avro type where Spark's own mapping cannot be written.

Spark 4.2 reads Avro `time-micros` / `time-millis` as its TIME type, which neither the Delta
nor the Parquet writer accepts (`UNSUPPORTED_TIME_TYPE`). The job decodes those fields as
their plain Avro long / int instead: microseconds (milliseconds) since midnight, a type
Spark, delta-rs and every Parquet reader hold. The binary encoding is the same, so the
adjusted schema reads the writer's bytes unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PLAIN_TIME = frozenset({"time-micros", "time-millis"})


def lake_schema(schema: Any) -> Any:
    """A copy of an Avro schema with every time logical type dropped to its plain type."""
    return without_logical_types(schema, lambda logical: logical in PLAIN_TIME)


def without_logical_types(schema: Any, drop: Callable[[str], bool]) -> Any:
    """A copy of an Avro schema without the logical types `drop` says yes to (their plain
    types have the same binary encoding)."""
    if isinstance(schema, list):
        return [without_logical_types(branch, drop) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    logical = schema.get("logicalType")
    out = ({k: v for k, v in schema.items() if k != "logicalType"}
           if logical is not None and drop(logical) else dict(schema))
    if "fields" in schema:
        out["fields"] = [{**f, "type": without_logical_types(f["type"], drop)}
                         for f in schema["fields"]]
    for key in ("items", "values"):
        if key in schema:
            out[key] = without_logical_types(schema[key], drop)
    return out
