"""The lake's manifest of transaction-consistent cuts: `<target>/_pgcdc/cuts`, a Delta table.

A cut is a PostgreSQL position `lsn` and, for every lake table, one Delta version, such that
those versions hold every change of every table with commit LSN ≤ `lsn` and none after it.
Reading each table at its version of one cut shows the source as of one PostgreSQL commit:
a transaction is either wholly visible across tables or not at all.

Written by the merge job (one row per batch that records a cut, idempotent per batch through
a Delta application transaction id), read by `pgcdc lake cuts`, `pgcdc verify` and the
reader helpers. Columns:

* `lsn` (long) and `lsn_text` ("16/B374D848"): the cut's position;
* `source_ts` (timestamp): commit time of the newest source transaction at or below `lsn`
  the job has seen (null until it has seen one);
* `batch_id` (long): the merge job's micro-batch that recorded it;
* `recorded_at` (timestamp): when the job recorded it;
* `versions` (map<string,long>): table path `"<schema>/<table>"` → Delta version; and, under
  `tombstone_key(path)` (`"_pgcdc/tombstones/<schema>/<table>"`, which no table path can be:
  a table path has one slash), the Delta version of the table's tombstones at the cut. Readers
  that look at tombstones (`pgcdc verify`) read them at that version: tombstone expiry
  (spark_jobs/rules/expiry.py) deletes old ones later. A cut recorded before these keys existed has
  none (`Cut.tombstones` is empty; such readers read the tombstones' latest version).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from connector.pgoutput.lsn import lsn_to_str

from ..lake.storage import options_for

CUTS_DIR = "_pgcdc/cuts"
TOMBSTONES_DIR = "_pgcdc/tombstones"
SCHEMA = pa.schema([
    pa.field("lsn", pa.int64(), nullable=False),
    pa.field("lsn_text", pa.string(), nullable=False),
    pa.field("source_ts", pa.timestamp("us", tz="UTC")),
    pa.field("batch_id", pa.int64(), nullable=False),
    pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("versions", pa.map_(pa.string(), pa.int64()), nullable=False),
])


@dataclass(frozen=True)
class Cut:
    lsn: int
    batch_id: int
    versions: Mapping[str, int]  # "<schema>/<table>" → Delta version
    source_ts_ms: int | None = None
    recorded_at_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    # "<schema>/<table>" → Delta version of the table's tombstones (tables that have some)
    tombstones: Mapping[str, int] = field(default_factory=dict)

    @property
    def lsn_text(self) -> str:
        return lsn_to_str(self.lsn)


def tombstone_key(rel_path: str) -> str:
    """Where table `rel_path`'s tombstones live under the target, and their key in the
    manifest's `versions`."""
    return f"{TOMBSTONES_DIR}/{rel_path}"


def _split(versions: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """A manifest row's `versions` → (table versions, tombstone versions)."""
    prefix = f"{TOMBSTONES_DIR}/"
    tables = {k: v for k, v in versions.items() if not k.startswith(prefix)}
    tombstones = {k[len(prefix):]: v for k, v in versions.items() if k.startswith(prefix)}
    return tables, tombstones


def manifest_path(target: str) -> str:
    return f"{target.rstrip('/')}/{CUTS_DIR}"


def _row(cut: Cut) -> dict[str, Any]:
    return {"lsn": cut.lsn, "lsn_text": cut.lsn_text,
            "source_ts": None if cut.source_ts_ms is None else cut.source_ts_ms * 1000,
            "batch_id": cut.batch_id, "recorded_at": cut.recorded_at_ms * 1000,
            "versions": sorted([*cut.versions.items(),
                                *((tombstone_key(p), v) for p, v in cut.tombstones.items())])}


def append_cut(target: str, cut: Cut, app_id: str,
               storage_options: Mapping[str, str] | None = None) -> bool:
    """Record `cut`; False when this app's batch recorded one already (a re-run batch)."""
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    path = manifest_path(target)
    options = options_for(path) if storage_options is None else dict(storage_options)
    if DeltaTable.is_deltatable(path, storage_options=options):
        done = DeltaTable(path, storage_options=options).transaction_version(app_id)
        if done is not None and done >= cut.batch_id:
            return False
    write_deltalake(path, pa.Table.from_pylist([_row(cut)], schema=SCHEMA), mode="append",
                    storage_options=options, commit_properties=CommitProperties(
                        app_transactions=[Transaction(app_id=app_id, version=cut.batch_id)]))
    return True


def read_cuts(target: str, storage_options: Mapping[str, str] | None = None) -> list[Cut]:
    """Every recorded cut, oldest position first (empty when none was recorded)."""
    from deltalake import DeltaTable

    path = manifest_path(target)
    options = options_for(path) if storage_options is None else dict(storage_options)
    if not DeltaTable.is_deltatable(path, storage_options=options):
        return []
    rows = DeltaTable(path, storage_options=options).to_pyarrow_table().to_pylist()
    cuts = []
    for r in rows:
        tables, tombstones = _split(dict(r["versions"]))
        cuts.append(Cut(r["lsn"], r["batch_id"], tables,
                        None if r["source_ts"] is None else _ms(r["source_ts"]),
                        _ms(r["recorded_at"]), tombstones))
    return sorted(cuts, key=lambda c: (c.lsn, c.batch_id))


def first_cut_at_or_after(cuts: list[Cut], lsn: int) -> Cut | None:
    return next((c for c in cuts if c.lsn >= lsn), None)


def _ms(value: Any) -> int:
    return int(value.timestamp() * 1000)
