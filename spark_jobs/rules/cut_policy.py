"""Transaction-consistent cuts (`--consistent-cuts`): which changes a batch applies, which it
holds back, and when it records a cut. Pure: the job (`runtime/job.py`) and the pending store
(`cuts/pending.py`) do the IO; the manifest (`cuts/manifest.py`) is the contract readers use.

A cut is a PostgreSQL position L with one Delta version per lake table such that those
versions hold every change of every table with commit LSN <= L and none after it (manifest).
The job must know two things per batch: that nothing at or below L is still on its way to
it (completeness), and that nothing after L is in the tables (isolation).

Completeness: the producer's heartbeats. `pgcdc run --heartbeat-interval-s N` commits a
transactional logical message every N seconds; when the publisher meets it in the stream it
produces a record to `<prefix>.heartbeat` whose `lsn` is the delivery tracker's delivered LSN W
(connector/publisher.py `publish`). W is the end LSN of the newest PostgreSQL transaction
that Kafka acknowledged together with every transaction before it (connector/sink/acks.py;
tickets are begun in commit order, so the delivered LSN only passes a transaction once it and
all earlier ones are acknowledged). In exactly-once mode (`TransactionalTracker`) W moves
only when a Kafka transaction commits, so every record below W is committed and therefore
visible to the job's read_committed consumer. Either way the records of every transaction
ending at or before W were in Kafka, readable, before the heartbeat record was produced.
(W is never raised by keepalives: the idle "flush to the server's end" position is the
pipeline's confirm LSN (connector/flow.py `confirmable`), not the tracker's delivered LSN; the
tracker starts at the slot's confirmed position, before which everything was acknowledged
or had nothing to publish.)

Which transactions W vouches for: a transaction's events carry its commit record's start
(`source.commit_lsn`), the tracker its end. Commit records do not overlap, so a transaction T
with commit_lsn(T) < W either is the one whose commit record ends at W or ended before that
one began: end_lsn(T) <= W, acknowledged. One with commit_lsn >= W ends after W: not vouched
for. So the bound B = W selects exactly `commit_lsn < B`, and the cut is L = B - 1 ("<= L").

Which batch has them: Spark fixes a micro-batch's end offsets when it plans the batch, and
plans batch N only after batch N-1 returned. A heartbeat read in batch N-1 was in Kafka when
batch N-1 ran, and the records it vouches for before it, so they are at offsets below batch
N's end offsets: in batches <= N. The heartbeats of batch N itself are not used for batch
N: Spark lists the partitions' end offsets for a batch without one atomic view, so the
heartbeat partition may have been listed after a vouched record's partition was. Hence the
bound applied in batch N is the highest heartbeat LSN seen in batches before N (`bound`),
and changes with commit_lsn >= B are held back (stored with their Kafka records under
`<target>/_pgcdc/pending/`, merged in front of the next batch's records). Two consequences:
the merge lags the stream by one batch plus one heartbeat interval, and the argument needs
every batch to read to the end offsets Spark listed, so `--max-offsets-per-trigger` and the
available-now trigger (one batch, no "previous batch") are refused with `--consistent-cuts`.

Isolation: the tables only receive changes with commit_lsn < B (held-back changes wait), so
the versions after batch N hold nothing after L = B - 1. The filter stands in front of the
merge (position guard, tombstones, truncate, TOAST); a held-back change is applied by the
same code one batch later, and a duplicate of an already applied change stays a no-op.

Snapshot rows. Initial snapshot rows carry commit_lsn = P (the slot's consistent point) and
are acknowledged under tickets ending at P before streaming starts (and so before the first
heartbeat, whose W is at least P). They stand for every transaction committed before P, so
they belong to the cut P - 1 and every later one: a snapshot row (`snapshot_row`, also the
truncate a re-snapshot starts with) is applied once B >= P, where a change is once B > its
commit_lsn. All of them together: a cut never shows part of the initial snapshot.
Incremental snapshot rows carry the chunk's low watermark l and are produced at its high
watermark h (connector/snapshot/incremental/window.py), so a cut between l and h may show some, all
or none of a chunk's rows. That contradicts no transaction: every key a chunk publishes is
unchanged between l and h (keys the stream changes are dropped from the window), so each row
shows its key's state at the cut. What such a cut cannot give is completeness of a table
whose lake copy lacks rows the incremental snapshot is bringing (a table added to the
publication): that table is complete from the first cut after its snapshot request is done
(as it is for any reader), the others at every cut.

Why heartbeats rather than per-transaction counts (the END records of
`<prefix>.transaction`, whose `data_collections` count each table's events): counting needs
per-transaction state (events seen per table, de-duplicated over at-least-once redelivery,
across batches and restarts) and the transaction topic (`--transaction-topic`, off by
default); a transaction whose tables are not subscribed, or a long idle period, would leave
the job unable to advance. A heartbeat costs one number per interval, needs nothing per
transaction, and advances the cut through idle tables and idle databases alike (the
heartbeat is itself a transaction).

Without heartbeats nothing can be vouched for: the job holds every change back (applying
unvouched changes would break the cuts recorded after them) and warns each batch, naming
`pgcdc run --heartbeat-interval-s`, once no heartbeat advanced the bound for `STALE_MS`.

Restarts and replays. The state after each batch (the bound it applied, the highest
heartbeat seen, the last recorded cut, where its held-back records are) is stored per batch,
so a batch Spark re-runs with the same offsets computes the same result, and a restarted job
continues from the last batch's state. A new checkpoint (a new application id) starts with no
heartbeat: it re-reads the topics from the earliest offsets, whatever heartbeats retention kept;
its cuts start at the first heartbeat it sees, never below `floor`: the manifest's last cut,
and the newest position the tables already hold (a target filled without --consistent-cuts,
or by a --replay, holds changes no heartbeat of the new application vouched for yet).

Cuts are recorded only when the bound advanced (an idle batch records nothing).

The same per-batch state gives the tombstone expiry bound (spark_jobs/rules/expiry.py): `restart`,
the highest restart_lsn heartbeats carried, and `expiry`, the bound of the next batch; plain
streaming keeps it too, for expiry alone (no bound, nothing held). `tombstones` holds the
Delta version of each table's tombstones, recorded in the cut for `pgcdc verify`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

from .expiry import expiry_bound

STALE_MS = 120_000  # no new heartbeat for this long: warn every batch
TRUNCATE_INDEX = -1  # txn_index of a snapshot's truncate (schemas/README.md "Ordering")


@dataclass(frozen=True)
class CutState:
    """What the job knows after one batch (persisted per batch by `held.PendingStore`)."""

    batch_id: int
    bound: int | None  # B applied in this batch: changes with commit_lsn < B are in the tables
    seen: int | None  # highest heartbeat LSN seen up to this batch: the next batch's bound
    last_cut: int | None  # LSN of the newest cut in the manifest (or the floor)
    source_ts_ms: int | None  # newest commit time of an applied change
    pending: str | None  # held-back Kafka records after this batch (None: none)
    advanced_ms: int  # when `seen` last advanced (or the job started): for the warning
    versions: dict[str, int] = field(default_factory=dict)  # table path → Delta version
    # table path → Delta version of its tombstones (the cut's, for `pgcdc verify`: cuts/manifest.py)
    tombstones: dict[str, int] = field(default_factory=dict)
    # highest heartbeat restart_lsn seen up to this batch (None: none carried one)
    restart: int | None = None
    # the next batch's tombstone expiry bound: `expiry.expiry_bound` of the heartbeats of the
    # batches before this one (None: nothing expires)
    expiry: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CutState:
        data = json.loads(text)
        for name in ("versions", "tombstones"):
            data[name] = {str(k): int(v) for k, v in data.get(name, {}).items()}
        return cls(**data)


def initial(floor: int | None, versions: dict[str, int], now_ms: int,
            tombstones: dict[str, int] | None = None) -> CutState:
    """The state before a fresh application's first batch: no heartbeat seen; cuts never go
    below `floor` (the manifest's last cut); `versions` of the tables already in the lake and
    `tombstones`, of their tombstones."""
    return CutState(-1, None, None, floor, None, None, now_ms, dict(versions),
                    dict(tombstones or {}))


def bound(previous: CutState) -> int | None:
    """The bound B of the batch after `previous`: the highest heartbeat of earlier batches."""
    return previous.seen


def snapshot_row(op: str | None, txn_index: int | None) -> bool:
    """A row of a snapshot (`r`) or the truncate that starts a snapshot into an existing topic
    (`t` at txn_index -1): its commit_lsn P stands for every transaction before P."""
    return op == "r" or (op == "t" and txn_index == TRUNCATE_INDEX)


def held(commit_lsn: int | None, bound_: int | None, snapshot: bool = False) -> bool:
    """Whether a change waits for a later batch: not yet vouched for by a heartbeat
    (commit_lsn >= bound). A snapshot's rows at P = bound are not held: they show the tables
    as of every commit before P, which is what the cut at P - 1 claims, and they were all in
    Kafka before streaming (and so any heartbeat) started. A record without a position
    (undecodable: a dead letter) is never held."""
    if commit_lsn is None:
        return False
    if bound_ is None:
        return True
    return commit_lsn > bound_ or (commit_lsn == bound_ and not snapshot)


def heartbeat_lsns(values: Iterable[int | None]) -> int | None:
    """The highest heartbeat LSN (or restart_lsn) of a batch (0 and None say nothing: a
    producer with nothing delivered yet, a heartbeat without restart_lsn)."""
    return max((v for v in values if v), default=None)


def cut_lsn(bound_: int) -> int:
    """The cut of bound B: every change with commit_lsn <= B - 1."""
    return bound_ - 1


def records_cut(previous: CutState, bound_: int | None) -> bool:
    """Whether the batch applying `bound_` records a cut: only when it moves past the last one
    (and never below the floor of a restarted application)."""
    if bound_ is None:
        return False
    return previous.last_cut is None or cut_lsn(bound_) > previous.last_cut


def after(previous: CutState, batch_id: int, bound_: int | None, heartbeat: int | None,
          applied_ts_ms: int | None, pending: str | None, versions: dict[str, int],
          recorded: bool, now_ms: int, restart: int | None = None,
          tombstones: dict[str, int] | None = None) -> CutState:
    """The state after batch `batch_id` (`versions`, `tombstones`: of the tables it wrote and
    their tombstones; `heartbeat` and `restart`: the highest heartbeat LSN and restart_lsn it
    read)."""
    seen = max((v for v in (previous.seen, heartbeat) if v is not None), default=None)
    restart_ = max((v for v in (previous.restart, restart) if v is not None), default=None)
    ts = max((v for v in (previous.source_ts_ms, applied_ts_ms) if v is not None), default=None)
    return replace(
        previous, batch_id=batch_id, bound=bound_, seen=seen,
        last_cut=cut_lsn(bound_) if recorded and bound_ is not None else previous.last_cut,
        source_ts_ms=ts, pending=pending,
        advanced_ms=now_ms if seen != previous.seen else previous.advanced_ms,
        versions={**previous.versions, **versions},
        tombstones={**previous.tombstones, **(tombstones or {})}, restart=restart_,
        expiry=expiry_bound(previous.seen, previous.restart))


def stale_warning(state: CutState, held_rows: bool, heartbeat_topic: str, now_ms: int
                  ) -> str | None:
    """The warning of a batch that held changes back while no heartbeat advanced the bound
    for `STALE_MS` (None: nothing to say)."""
    if not held_rows or now_ms - state.advanced_ms < STALE_MS:
        return None
    what = ("no heartbeat seen yet" if state.seen is None
            else f"no new heartbeat for {(now_ms - state.advanced_ms) // 1000} s")
    return (f"--consistent-cuts: {what} on {heartbeat_topic}; changes are held back until one "
            "arrives: run the producer with `pgcdc run --heartbeat-interval-s N`")
