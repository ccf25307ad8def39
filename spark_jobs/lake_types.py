"""The lake's type for each Avro type where Spark's own mapping cannot be written.

Spark 4.2 reads Avro `time-micros` / `time-millis` as its TIME type, which neither the Delta
nor the Parquet writer accepts (`UNSUPPORTED_TIME_TYPE`). The job decodes those fields as
their plain Avro long / int instead: microseconds (milliseconds) since midnight, a type
Spark, delta-rs and every Parquet reader hold. The binary encoding is the same, so the
adjusted schema reads the writer's bytes unchanged."""

from __future__ import annotations

from typing import Any

PLAIN_TIME = frozenset({"time-micros", "time-millis"})


def lake_schema(schema: Any) -> Any:
    """A copy of an Avro schema with every time logical type dropped to its plain type."""
    if isinstance(schema, list):
        return [lake_schema(branch) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("logicalType") in PLAIN_TIME:
        return {k: v for k, v in schema.items() if k != "logicalType"}
    out = dict(schema)
    if "fields" in schema:
        out["fields"] = [{**f, "type": lake_schema(f["type"])} for f in schema["fields"]]
    for key in ("items", "values"):
        if key in schema:
            out[key] = lake_schema(schema[key])
    return out
