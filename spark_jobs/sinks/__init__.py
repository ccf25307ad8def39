"""Writing a batch's changes: the lake formats and their registry, dead letters.

A lake format is a module (or package) with `open_sink(settings: TableSettings) -> TableSink`
(`table_sink.py`), and `list_tables(spark, root)` when it keeps mirrors (`mirror.py`), plus
one line in `FORMATS` below naming it and the features it supports;
`runtime/config.py` validates `--format` and the options that need a feature against this
registry, and the job opens each table's sink through `open_sink`. Formats today: `delta`
(`delta/`: a mirror per table, `delta/mirror.DeltaMirror`, written through Spark or through
delta-rs for small batches over one `delta/state.DeltaTableState`) and `parquet` (an
append-only change log, `parquet_sink`).

Loads no pyspark (the CLI reads the registry without a JVM): a format's module is imported
when the job opens its first table."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .table_sink import TableSettings, TableSink

# What a format may support, each named by the option that needs it.
HISTORY = "--history"  # history tables beside the mirror (spark_jobs/history/)
CUTS = "--consistent-cuts"  # cuts name each table's version (spark_jobs/cuts/)
TOMBSTONES = "tombstones"  # deletes remembered and expired (rules/expiry.py)
COLUMN_MAPPING = "--column-mapping"
DATABASE = "--database"  # tables registered in the Spark catalog
FAST_MERGE = "--fast-merge"  # small batches through delta-rs (sinks/delta/delta_rs_writer.py)


@dataclass(frozen=True)
class LakeFormat:
    title: str  # how messages name its tables ("Delta tables")
    module: str  # the module with `open_sink(settings) -> TableSink`
    features: frozenset[str] = frozenset()
    about: str = ""  # what it keeps instead, for messages refusing an option it lacks

    def open_sink(self, settings: TableSettings) -> TableSink:
        sink: TableSink = importlib.import_module(self.module).open_sink(settings)
        return sink

    def list_tables(self, spark: SparkSession, root: str) -> list[str]:
        """The format's tables under `root` (`<schema>/<table>`): a mirror format's
        `list_tables`; a change log lists none."""
        lister = getattr(importlib.import_module(self.module), "list_tables", None)
        return [] if lister is None else list(lister(spark, root))


FORMATS: dict[str, LakeFormat] = {
    "delta": LakeFormat("Delta", "spark_jobs.sinks.delta", frozenset(
        {HISTORY, CUTS, TOMBSTONES, COLUMN_MAPPING, DATABASE, FAST_MERGE})),
    "parquet": LakeFormat("Parquet", "spark_jobs.sinks.parquet_sink", about=(
        "the Parquet change log has each change's _cdc_commit_lsn instead, and keeps no "
        "tombstones")),
}


def lake_format(name: str) -> LakeFormat:
    """The registered format `name` (ValueError naming the registered ones)."""
    found = FORMATS.get(name)
    if found is None:
        raise ValueError(f"--format must be one of {', '.join(sorted(FORMATS))}, "
                         f"not {name!r}")
    return found


def supporting(feature: str) -> str:
    """The titles of the formats that support `feature` ("Delta")."""
    return " or ".join(f.title for f in FORMATS.values() if feature in f.features)
