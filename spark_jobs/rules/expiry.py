"""Tombstone expiry: which tombstones no change can need any more. Pure: the job
(`runtime/job.py`) applies the bound during maintenance through delta-rs
(`delta_rs_writer.DeltaRsSink.expire_tombstones`) or Spark (`SparkDeltaSink.expire_tombstones`).

Contract: a tombstone (key k, position P = its delete's `_cdc_commit_lsn`) may go once no change
of k with `commit_lsn <= P` can reach the job again. Batch N expires the tombstones with
`commit_lsn < min(W, R)` of the heartbeats read in batches up to N-2 (`expiry_bound`; W the
producer's delivered LSN, R its slot's restart_lsn, both carried by each heartbeat), a bound
derived only from state persisted after batch N-1, so a re-run batch computes the same bound.
The argument needs batch N-1 to have read every partition to the end offsets Spark listed for
it: where `--max-offsets-per-trigger` bounds batches, batch N expires only when Spark's report
of batch N-1 says so (`read_to_listed`; otherwise, and when the report is not there, as after a
restart, the expiry waits for the next batch that can: expiring later is always safe).
Where the argument does not hold (no heartbeats, available-now, --format parquet, ...), nothing
is expired and the job says so at start (`MergeConfig.expiry_off`).

The argument: docs/design/tombstone-expiry.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .changes import LSN


def expiry_bound(heartbeat_lsn: int | None, restart_lsn: int | None) -> int | None:
    """The bound B = min(W, R) of the heartbeats read so far (None: nothing can expire): no
    change with commit_lsn < B can reach the job again once they are two batches old."""
    if heartbeat_lsn is None or restart_lsn is None:
        return None
    return min(heartbeat_lsn, restart_lsn)


def expired_predicate(bound: int) -> str:
    """The tombstones bound B expires, as SQL (Spark and delta-rs): commit_lsn < B."""
    return f"{LSN} < {int(bound)}"


def read_to_listed(progress: Mapping[str, Any] | None, batch_id: int) -> bool:
    """Whether Spark's progress report `progress` (a StreamingQueryProgress as a mapping) says
    batch `batch_id` read every partition to the latest offsets Spark listed when it planned
    it: the report is that batch's and each Kafka source's `maxOffsetsBehindLatest` is 0.
    False when unknown: no report, another batch's (an idle trigger's, a restarted query's
    first batch), or no source metrics."""
    if not progress or progress.get("batchId") != batch_id:
        return False
    sources = progress.get("sources") or []
    behind = [(s.get("metrics") or {}).get("maxOffsetsBehindLatest") for s in sources]
    return bool(behind) and all(b is not None and float(b) == 0 for b in behind)
