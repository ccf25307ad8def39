"""Where `--consistent-cuts` keeps what outlives a batch: `<target>/_pgcdc/pending/<app id>/`;
and where plain streaming keeps its heartbeat state for tombstone expiry
(spark_jobs/rules/expiry.py): `<target>/_pgcdc/heartbeats/<app id>/`, state files only (it
holds nothing back). Apart, so that turning --consistent-cuts on for a checkpoint never takes
a plain run's state, whose tables hold changes no cut vouched for, for its own.

* `state-<batch>.json`: the `cut_policy.CutState` after the batch, written (atomically: a
  temporary file renamed) once its tables, held-back records and cut are committed;
* `batch-<batch>/`: Parquet of the Kafka records the batch held back (topic, partition,
  offset, timestamp, key, value: the Kafka source's columns), read back in front of the next
  batch's records.

Spark commits a batch's offsets to its checkpoint only after the batch returns, and re-runs
an uncommitted batch with the same id and offsets. So: a batch whose state file exists is
done (skipped when re-run); otherwise it reads the state of the latest earlier batch and that
batch's held records, which are deleted only after this batch's state is written, so a
re-run sees exactly what the first attempt saw and computes the same result. The directory
is per application id (per checkpoint): a new checkpoint re-reads the topics and starts
afresh. Heartbeat records are decoded here too (`heartbeat_positions`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from typing import Any

from fastavro import parse_schema, schemaless_reader
from pyspark.sql import DataFrame, SparkSession

from ..events.registry import SchemaCache
from ..lake.files import HadoopFs
from ..rules.cut_policy import CutState, heartbeat_lsns

RAW_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
_STATE = re.compile(r"state-(\d+)\.json$")


PENDING, HEARTBEATS = "pending", "heartbeats"  # the two areas


class PendingStore:
    def __init__(self, spark: SparkSession, target: str, app_id: str,
                 area: str = PENDING) -> None:
        self.spark = spark
        self.root = f"{target.rstrip('/')}/_pgcdc/{area}/{app_id}"
        self.fs = HadoopFs(spark, self.root)

    def _state_path(self, batch_id: int) -> str:
        return f"{self.root}/state-{batch_id:012d}.json"

    def _states(self) -> list[tuple[int, str]]:
        found = []
        for path in self.fs.glob(f"{self.root}/state-*.json"):
            match = _STATE.search(path)
            if match:
                found.append((int(match[1]), path))
        return sorted(found)

    def done(self, batch_id: int) -> bool:
        return self.fs.exists(self._state_path(batch_id))

    def latest(self, before: int) -> CutState | None:
        """The state of the newest batch before `before` (None: a fresh application)."""
        earlier = [p for b, p in self._states() if b < before]
        return CutState.from_json(self.fs.read_text(earlier[-1])) if earlier else None

    def write_state(self, state: CutState) -> None:
        path = self._state_path(state.batch_id)
        tmp = f"{self.root}/_tmp-{state.batch_id}.json"
        self.fs.write_text(tmp, state.to_json())
        if self.fs.exists(path):
            self.fs.delete(path)
        self.fs.rename(tmp, path)

    def read_rows(self, path: str) -> DataFrame:
        return self.spark.read.parquet(path).select(*RAW_COLUMNS)

    def write_rows(self, rows: DataFrame, batch_id: int) -> str:
        """Store a batch's held-back records (replacing an earlier attempt's); their path."""
        path = f"{self.root}/batch-{batch_id:012d}"
        rows.select(*RAW_COLUMNS).write.mode("overwrite").parquet(path)
        return path

    def prune(self, batch_id: int) -> None:
        """Delete the states and held records of the batches before `batch_id` (whose state,
        already written, has taken over what they held)."""
        for b, path in self._states():
            if b < batch_id:
                self.fs.delete(path)
        for path in self.fs.glob(f"{self.root}/batch-*"):
            number = path.rstrip("/").rsplit("batch-", 1)[-1]
            if number.isdigit() and int(number) < batch_id:
                self.fs.delete(path)


def heartbeat_positions(records: Iterable[tuple[int, bytes]], schemas: SchemaCache
                        ) -> tuple[int | None, int | None]:
    """The highest `lsn` and the highest `restart_lsn` (`cut_policy.heartbeat_lsns`) of
    heartbeat records given as (schema id, Avro body); a heartbeat written before
    `restart_lsn` was carried has none."""
    parsed: dict[int, Any] = {}
    lsns: list[int | None] = []
    restarts: list[int | None] = []
    for sid, body in records:
        if sid not in parsed:
            parsed[sid] = parse_schema(schemas.get(sid))
        record = schemaless_reader(io.BytesIO(body), parsed[sid], None)
        assert isinstance(record, dict)
        lsns.append(record.get("lsn"))
        restarts.append(record.get("restart_lsn"))
    return heartbeat_lsns(lsns), heartbeat_lsns(restarts)
