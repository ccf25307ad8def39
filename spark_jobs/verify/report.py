"""`pgcdc verify`'s verdicts, pure: range planning, the classification of rows into verified /
skipped / missing / extra / differing, and the report (text and JSON).

The rules (PostgreSQL read at the snapshot position L, the lake at the first cut at or after
L; "at or before L" means commit LSN < L, because a commit record starting exactly at the
slot's consistent point is decoded after it, schemas/README.md "Ordering"):

* a key changed after L (a lake row at the cut with position ≥ L, or a tombstone in
  [L, cut] at the cut's version of the tombstones) is **skipped** on both sides: the lake
  holds a later state than PostgreSQL at L;
* a key on both sides whose values are equal is **verified**, otherwise **differing** (with
  the columns that differ);
* a key only PostgreSQL has is **missing** from the lake, unless the lake table was truncated
  after L (its rows at L are gone from the lake and nothing says which): then skipped;
* a key only the lake has (at a position before L) is **extra**.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .compare import normalize

Row = Mapping[str, Any]  # PostgreSQL column name → canonical text (hashed) or value (direct)


@dataclass(frozen=True)
class RangeSummary:
    """One hash range of one side: rows, bit_xor and sum of their 64-bit row hashes."""

    count: int
    xor: int
    total: int


def range_count(estimated_rows: int, rows_per_range: int) -> int:
    """Ranges for a table of about `estimated_rows` rows (at least 1)."""
    return max(1, math.ceil(max(estimated_rows, 0) / max(rows_per_range, 1)))


def differing_ranges(pg: Mapping[int, RangeSummary],
                     lake: Mapping[int, RangeSummary]) -> list[int]:
    """Ranges whose summaries differ (a range absent on one side has 0 rows there)."""
    empty = RangeSummary(0, 0, 0)
    return sorted(b for b in pg.keys() | lake.keys() if pg.get(b, empty) != lake.get(b, empty))


def drill_plan(bad: Sequence[int], pg: Mapping[int, RangeSummary],
               lake: Mapping[int, RangeSummary], max_rows: int) -> tuple[list[int], list[int]]:
    """The differing ranges to fetch row by row (while their rows on both sides fit in
    `max_rows`) and those left unresolved."""
    empty = RangeSummary(0, 0, 0)
    chosen: list[int] = []
    left: list[int] = []
    rows = 0
    for b in bad:
        size = pg.get(b, empty).count + lake.get(b, empty).count
        if rows + size <= max_rows or not chosen:
            chosen.append(b)
            rows += size
        else:
            left.append(b)
    return chosen, left


@dataclass
class Example:
    key: str
    kind: str  # missing | extra | differing
    columns: list[str] = field(default_factory=list)
    postgres: dict[str, Any] | None = None
    lake: dict[str, Any] | None = None


@dataclass
class TableReport:
    table: str  # schema.table
    lake_version: int | None = None
    verified: int = 0
    skipped: int = 0
    missing: int = 0
    extra: int = 0
    differing: int = 0
    ranges: int = 0
    differing_ranges: int = 0
    unresolved_ranges: int = 0
    direct_columns: list[str] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)
    error: str | None = None
    # Not in PostgreSQL, and its lake table at the cut is empty (the drop reached the lake:
    # docs/merge-job.md "Dropped tables"): nothing to compare, nothing differs.
    dropped: bool = False

    @property
    def clean(self) -> bool:
        return self.error is None and not (self.missing or self.extra or self.differing
                                           or self.unresolved_ranges)


def not_in_postgresql(report: TableReport, lake_has_rows: bool | None) -> None:
    """The verdict on a table of the cut that PostgreSQL does not have (dropped upstream):
    equal when its lake table is empty at the cut (the drop reached the lake), an error when
    it still holds rows or there is no lake table (`lake_has_rows` None)."""
    if lake_has_rows is False:
        report.dropped = True
    else:
        report.error = "not found in PostgreSQL" + (
            "" if lake_has_rows is None else " (dropped?), but its lake table holds rows")


@dataclass
class Report:
    snapshot_lsn: str
    cut_lsn: str | None
    tables: list[TableReport] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return all(t.clean for t in self.tables)

    @property
    def errors(self) -> bool:
        return any(t.error is not None for t in self.tables)


def display_key(key_columns: Sequence[str], row: Row) -> str:
    return ", ".join(f"{c}={row.get(c)}" for c in key_columns)


def differing_columns(pg: Row, lake: Row, columns: Iterable[str]) -> list[str]:
    """Columns whose values differ (canonical texts compare as text; direct values through
    the normaliser both sides of `spark_jobs.verify.compare` use)."""
    out = []
    for c in columns:
        a, b = pg.get(c), lake.get(c)
        if normalize(a, b) != normalize(b, a):
            out.append(c)
    return out


def classify(report: TableReport, key_columns: Sequence[str], columns: Sequence[str],
             pg: Mapping[str, Row], lake: Mapping[str, Row], truncated_after: bool,
             max_examples: int) -> set[str]:
    """Count the rows of drilled ranges (`pg`, `lake`: key text → row, keys changed after L
    already left out) into `report`; the keys found differing are returned."""
    differing: set[str] = set()
    for k in sorted(pg.keys() | lake.keys()):
        a, b = pg.get(k), lake.get(k)
        if a is not None and b is not None:
            cols = differing_columns(a, b, columns)
            if not cols:
                report.verified += 1
                continue
            report.differing += 1
            differing.add(k)
            _example(report, max_examples, Example(display_key(key_columns, a), "differing",
                                                   cols, _pick(a, cols), _pick(b, cols)))
        elif a is not None:
            if truncated_after:
                report.skipped += 1
                continue
            report.missing += 1
            _example(report, max_examples, Example(display_key(key_columns, a), "missing",
                                                   postgres=_short(a)))
        else:
            assert b is not None
            report.extra += 1
            _example(report, max_examples, Example(display_key(key_columns, b), "extra",
                                                   lake=_short(b)))
    return differing


def direct_differences(report: TableReport, key_columns: Sequence[str],
                       columns: Sequence[str], pg: Mapping[str, Row], lake: Mapping[str, Row],
                       max_examples: int) -> set[str]:
    """Directly compared columns of keys both sides have (rows of one side only are the
    hashes' to find): the keys whose values differ, with examples."""
    out: set[str] = set()
    for k in sorted(pg.keys() & lake.keys()):
        cols = differing_columns(pg[k], lake[k], columns)
        if cols:
            out.add(k)
            _example(report, max_examples, Example(display_key(key_columns, pg[k]),
                                                   "differing", cols, _pick(pg[k], cols),
                                                   _pick(lake[k], cols)))
    return out


def _example(report: TableReport, limit: int, example: Example) -> None:
    if len(report.examples) < limit:
        report.examples.append(example)


def _pick(row: Row, columns: Sequence[str]) -> dict[str, Any]:
    return {c: row.get(c) for c in columns}


def _short(row: Row, width: int = 200) -> dict[str, Any]:
    return {c: (v[:width] + "..." if isinstance(v, str) and len(v) > width else v)
            for c, v in row.items()}


def exit_code(report: Report) -> int:
    """0: the lake equals PostgreSQL; 3: it differs; 1: a table could not be verified."""
    if report.errors:
        return 1
    return 0 if report.clean else 3


def render_text(report: Report) -> list[str]:
    lines = [f"snapshot at {report.snapshot_lsn}, lake cut at {report.cut_lsn or '-'}"]
    for t in report.tables:
        if t.error is not None:
            lines.append(f"{t.table}: ERROR: {t.error}")
            continue
        if t.dropped:
            lines.append(f"{t.table}: equal: dropped upstream, its lake table is empty (lake "
                         f"version {t.lake_version if t.lake_version is not None else '-'})")
            continue
        verdict = "equal" if t.clean else "DIFFERS"
        lines.append(f"{t.table}: {verdict}: {t.verified} verified, {t.skipped} skipped,"
                     f" {t.missing} missing, {t.extra} extra, {t.differing} differing"
                     f" ({t.ranges} ranges, {t.differing_ranges} differing"
                     f"{f', {t.unresolved_ranges} not drilled' if t.unresolved_ranges else ''}"
                     f"; lake version {t.lake_version if t.lake_version is not None else '-'})")
        if t.direct_columns:
            lines.append(f"  compared directly: {', '.join(t.direct_columns)}")
        for e in t.examples:
            if e.kind == "differing":
                lines.append(f"  differing {e.key}: " + "; ".join(
                    f"{c}: PostgreSQL {_value(e.postgres, c)}, lake {_value(e.lake, c)}"
                    for c in e.columns))
            else:
                lines.append(f"  {e.kind} {e.key}")
    clean = sum(t.clean for t in report.tables)
    lines.append(f"{clean} of {len(report.tables)} table(s) equal")
    return lines


def _value(row: Mapping[str, Any] | None, column: str, width: int = 80) -> str:
    text = repr(None if row is None else row.get(column))
    return text if len(text) <= width else text[: width - 3] + "..."


def render_json(report: Report) -> str:
    tables = []
    for t in report.tables:
        item = asdict(t)
        item["clean"] = t.clean
        tables.append(item)
    return json.dumps({"snapshot_lsn": report.snapshot_lsn, "cut_lsn": report.cut_lsn,
                       "clean": report.clean, "tables": tables}, default=str, indent=1)
