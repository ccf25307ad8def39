"""Transaction-consistent cuts (`--consistent-cuts`): which changes a batch applies, which it
holds back, and when it records a cut. Pure: the job (`runtime/job.py`) and the pending store
(`cuts/pending.py`) do the IO; the manifest (`cuts/manifest.py`) is the contract readers use.

Batch N applies the changes with commit LSN below its bound B (`bound`: the highest heartbeat
LSN of the batches before N, each vouching that every transaction ending at or before it is in
Kafka), holds the others back (a snapshot row waits until B >= its LSN), and records the cut
L = B - 1 when B advanced. The per-batch state (`CutState`) also gives the tombstone expiry
bound (`expiry.py`). Why such a cut is complete and isolated, snapshot rows, restarts:
docs/design/consistent-cuts.md."""

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
