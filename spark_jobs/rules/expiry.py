"""Tombstone expiry: which tombstones no change can need any more. Pure: the job
(`runtime/job.py`) applies the bound during maintenance through delta-rs
(`fast_sink.DeltaRsSink.expire_tombstones`) or Spark (`SparkDeltaSink.expire_tombstones`).

A tombstone (key k, position P = its delete's `_cdc_commit_lsn`) drops a change of k at or
before P that reaches the job after the delete was applied. It can go once no change with
`commit_lsn <= P` can reach the job again. Such a change can come from two places:

(a) records already in Kafka the job has not read yet (partitions are read unevenly; a key
    whose Kafka key changed, a primary key changed, sits in another partition). A heartbeat
    carries W, the delivery tracker's delivered LSN: every transaction with commit_lsn < W
    was in Kafka, readable by the job's read_committed consumer, before the heartbeat was
    produced (spark_jobs/rules/cut_policy.py, "Completeness", also for exactly-once mode, where W
    moves only when a Kafka transaction commits). An incremental snapshot chunk's rows carry
    its low watermark l and are produced later, but a key deleted between l and the chunk's
    high watermark is dropped from the chunk, so none of them is older than a tombstone.
(b) duplicates the producer sends again after a restart: pgoutput decodes from the slot's
    restart_lsn R, so a transaction whose commit record starts before R is never decoded
    again. The heartbeat carries R as read from `pg_replication_slots` when it was emitted
    (`Pipeline._heartbeat`). The walsender moves a logical slot's restart_lsn forward only
    (LogicalConfirmReceivedLocation, to a candidate found while decoding) and writes it to
    the slot's state file (ReplicationSlotSave, fsynced) right after changing it in memory,
    before it lets WAL go (ReplicationSlotsComputeRequiredLSN); a restarted server reads it
    back from that file. confirmed_flush is not used: it reaches disk lazily (at
    checkpoints) and comes back older after a crash.

Which batch: a heartbeat read in batch N-2 was in Kafka when batch N-1's end offsets were
listed, and so were the records it vouches for (the listing argument of rules/cut_policy.py), so
they were all read by batch N-1; a crash of batch N re-runs batch N with its own records only.
So batch N expires the tombstones with `commit_lsn < min(W, R)` of heartbeats read in batches
up to N-2 (`expiry_bound`), a bound derived only from the state persisted after batch N-1
(`cut_policy.CutState.expiry`): a batch re-run after a crash between the expiry and its
checkpoint computes the same bound, and deleting again is a no-op. The job's held-back
changes (--consistent-cuts) all have commit_lsn >= the bound applied, which is >= this one.
Plain streaming (no --consistent-cuts) applies every change in the batch that read it, keeps
the same state per batch (`cut_policy.after` with no cut bound, under `_pgcdc/heartbeats/`:
cuts/pending.py) and so expires with the same bound. Batches that wrote no state (a run in a mode
below) do not weaken it: a state's heartbeats were read before the batch that wrote the next
state listed its offsets, and that batch read to them.

Readers of cuts: the cut records each table's tombstone version taken before its batch's
expiry (cuts/manifest.py), and `pgcdc verify` reads the tombstones there (verify/lake_side.py
says why every tombstone it needs is at that version).

Where the argument does not hold nothing is expired, and the job says so in a log line at
start (`MergeConfig.expiry_off`): where batches do not read to the offsets Spark listed, one
after another (--max-offsets-per-trigger, available-now and --replay; --consistent-cuts
refuses them), with --topics and no --consistent-cuts (the heartbeat topic, which may not
exist, is only subscribed through the --topic-prefix pattern), with --maintenance-every 0 and
with --format parquet (no tombstones). Without heartbeats (`pgcdc run --heartbeat-interval-s
0`), or with heartbeats of a producer that does not carry restart_lsn yet, there is no bound
and tombstones are only compacted.

What remains: a PostgreSQL crash in the instant between the walsender advancing restart_lsn in
memory and its state file reaching disk, with a heartbeat reading the new value then, and a
failover to a standby whose synced slot trails the primary's, both let the producer send again
transactions below R. The delete that made each expired tombstone is sent again after them,
in the same partition (same key), so the table ends the same; a reader may see a deleted key
come back until that delete is applied.
"""

from __future__ import annotations

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
