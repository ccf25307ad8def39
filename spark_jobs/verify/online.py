"""`pgcdc verify`: prove, while writes continue, that the lake equals PostgreSQL.

1. PostgreSQL is read as of a position L (verify/source_side.py: an exported snapshot of a
   temporary slot, imported into one REPEATABLE READ transaction).
2. The lake is read at the first consistent cut at or after L (`_pgcdc/cuts`, recorded by
   `pgcdc merge --consistent-cuts`; spark_jobs/cuts/manifest.py): each table at that cut's Delta
   version holds every change before L, and perhaps some after it, which the lake itself
   shows (row positions, tombstones at the cut's version of them): those keys are skipped on
   both sides.
3. Per table, each side summarises hash ranges of the key (verify/canon.py: count, bit_xor
   and sum of 64-bit row hashes of a canonical row text) in one scan; only ranges whose
   summaries differ are fetched row by row and classified (verify/report.py), so an equal
   100M-row table moves only its range summaries. Columns without a common canonical text
   are read and compared directly.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from connector.errors import SinkError
from connector.names import from_topic_part, topic_part
from connector.pgoutput.lsn import lsn_to_str
from connector.replication.admin import ReplicationAdmin

from ..cuts.manifest import Cut, first_cut_at_or_after, read_cuts
from . import lake_side as lake
from .canon import KeyNotHashable, table_canon
from .compare import lake_names
from .report import (
    Report,
    TableReport,
    classify,
    differing_ranges,
    direct_differences,
    drill_plan,
    not_in_postgresql,
    range_count,
)
from .source_side import SourceAt

Progress = Callable[[str], None]


@dataclass
class VerifyConfig:
    dsn: str
    target: str
    tables: Sequence[str] = ()  # schema.table patterns; empty: the tables of the cut
    max_examples: int = 10
    timeout_s: float = 300.0
    rows_per_range: int = 50_000
    max_drill_rows: int = 1_000_000
    poll_s: float = 1.0
    progress: Progress = field(default=lambda _line: None)


def wait_for_cut(target: str, lsn: int, timeout_s: float, poll_s: float = 1.0,
                 progress: Progress = lambda _line: None) -> Cut:
    """The first cut at or after `lsn`, polling the manifest until `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    said = False
    while True:
        cut = first_cut_at_or_after(read_cuts(target), lsn)
        if cut is not None:
            return cut
        if time.monotonic() >= deadline:
            raise SinkError(f"no consistent cut at or after {lsn_to_str(lsn)} in {target} within"
                            f" {timeout_s:g}s: is the merge job running with"
                            " `pgcdc merge --consistent-cuts`?")
        if not said:
            progress(f"waiting for a lake cut at or after {lsn_to_str(lsn)}")
            said = True
        time.sleep(poll_s)


def bucket_of(key_text: str, ranges: int) -> int:
    """The range of a key text, as both SQL sides compute it (canon.pg_bucket)."""
    return int(hashlib.md5(key_text.encode()).hexdigest()[:8], 16) % ranges


def run_verify(spark: Any, config: VerifyConfig) -> Report:
    source = SourceAt.open(config.dsn)
    try:
        config.progress(f"PostgreSQL snapshot at {source.lsn_text}")
        cut = wait_for_cut(config.target, source.lsn, config.timeout_s, config.poll_s,
                           config.progress)
        config.progress(f"lake cut at {cut.lsn_text} (batch {cut.batch_id})")
        report = Report(source.lsn_text, cut.lsn_text)
        for schema, table in _tables(source, cut, config.tables):
            report.tables.append(_verify_table(spark, source, cut, schema, table, config))
        return report
    finally:
        source.close()


def _tables(source: SourceAt, cut: Cut, patterns: Sequence[str]) -> list[tuple[str, str]]:
    if patterns:
        return ReplicationAdmin(source.conn).matching_tables(patterns, require_each=True)
    out = []
    for rel in sorted(cut.versions):
        schema, _, table = rel.partition("/")
        out.append((from_topic_part(schema), from_topic_part(table)))
    return out


def _verify_table(spark: Any, source: SourceAt, cut: Cut, schema: str, table: str,
                  config: VerifyConfig) -> TableReport:
    name = f"{schema}.{table}"
    report = TableReport(name)
    rel = f"{topic_part(schema)}/{topic_part(table)}"
    version = cut.versions.get(rel)
    report.lake_version = version
    columns = source.columns(schema, table)
    if not columns:
        # Dropped upstream: equal when the drop reached the lake (its table emptied).
        not_in_postgresql(report, None if version is None else bool(lake.table_at(
            spark, f"{config.target.rstrip('/')}/{rel}", version).limit(1).count()))
        return report
    if version is None:
        report.error = "no lake table at the cut (the merge job has not written it)"
        return report
    path = f"{config.target.rstrip('/')}/{rel}"
    frame = lake.table_at(spark, path, version)
    types = lake.row_types(frame)
    names = lake_names([c.name for c in columns], types)
    absent = [c.name for c in columns if c.name not in names]
    if absent:
        report.error = f"columns missing in the lake: {absent}"
        return report
    key = source.primary_key(schema, table) or [c.name for c in columns]
    try:
        canon = table_canon(columns, key, types, names)
    except KeyNotHashable as exc:
        report.error = f"cannot be verified by ranges: {exc}"
        return report
    report.direct_columns = list(canon.direct)
    excluded = lake.changed_after(spark, frame, config.target, rel, canon, source.lsn, cut.lsn,
                                  cut.tombstones.get(rel))
    truncated = lake.truncated_at(path, version)
    truncated_after = truncated is not None and truncated >= source.lsn
    report.skipped = len(excluded)
    estimate = source.estimated_rows(schema, table)
    ranges = range_count(estimate, config.rows_per_range)
    report.ranges = ranges
    started = time.monotonic()
    pg_sums = source.summaries(schema, table, canon, ranges, sorted(excluded))
    pg_rows = sum(s.count for s in pg_sums.values())
    pg_s = time.monotonic() - started
    config.progress(f"{name}: PostgreSQL {pg_rows} rows in {ranges} ranges hashed in {pg_s:.1f}s"
                    f" ({pg_rows / max(pg_s, 1e-3):,.0f} rows/s)")
    started = time.monotonic()
    lake_sums = lake.summaries(frame, canon, ranges, source.lsn, excluded)
    lake_s = time.monotonic() - started
    lake_rows = sum(s.count for s in lake_sums.values())
    config.progress(f"{name}: lake {lake_rows} rows hashed in {lake_s:.1f}s"
                    f" ({lake_rows / max(lake_s, 1e-3):,.0f} rows/s)")
    bad = differing_ranges(pg_sums, lake_sums)
    report.differing_ranges = len(bad)
    chosen, left = drill_plan(bad, pg_sums, lake_sums, config.max_drill_rows)
    report.unresolved_ranges = len(left)
    report.verified = sum(s.count for b, s in pg_sums.items() if b not in set(bad))
    if chosen:
        config.progress(f"{name}: fetching the rows of {len(chosen)} differing range(s)")
        pg_drill = source.rows(schema, table, canon, ranges, chosen, sorted(excluded))
        lake_drill = lake.rows(frame, canon, ranges, chosen, source.lsn, excluded)
        classify(report, canon.key, canon.columns, pg_drill, lake_drill, truncated_after,
                 config.max_examples)
    if canon.direct:
        config.progress(f"{name}: comparing {', '.join(canon.direct)} directly")
        drilled = set(bad)
        pg_direct = {k: v for k, v in source.direct_rows(schema, table, canon,
                                                         sorted(excluded)).items()
                     if bucket_of(k, ranges) not in drilled}
        lake_direct = lake.direct_rows(frame, canon, source.lsn, excluded)
        differ = direct_differences(report, canon.key, canon.direct, pg_direct, lake_direct,
                                    config.max_examples)
        report.verified -= len(differ)
        report.differing += len(differ)
    return report
