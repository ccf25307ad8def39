"""Run by PyFlink's own interpreter (scripts/devstack/flink.py), not by pytest: read a Kafka
topic with Flink SQL's ``debezium-avro-confluent`` format, apply its changelog, and print the
final rows as JSON lines (each value made plain: ISO dates and times, decimal text, hex).

    python flink_sql.py '{"jars": [...], "ddl": "...", "query": "SELECT ...", "key": 0}'

The DDL's table reads the topic to its end at start (bounded), so the job finishes."""

from __future__ import annotations

import datetime as dt
import json
import sys
from decimal import Decimal
from typing import Any

from pyflink.common import RowKind
from pyflink.table import EnvironmentSettings, TableEnvironment


def plain(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, float):
        return repr(value)
    return value


def main(spec: dict[str, Any]) -> None:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join("file://" + jar for jar in spec["jars"]))
    config.set("parallelism.default", "1")
    config.set("table.exec.resource.default-parallelism", "1")
    env.execute_sql(spec["ddl"])
    rows: dict[Any, list[Any]] = {}
    with env.execute_sql(spec["query"]).collect() as results:
        for row in results:
            values = [plain(v) for v in row]
            kind = row.get_row_kind()
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                rows[values[spec["key"]]] = values
            else:  # UPDATE_BEFORE, DELETE
                rows.pop(values[spec["key"]], None)
    for key in sorted(rows):
        print(json.dumps(rows[key]))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
