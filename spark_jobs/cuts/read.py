"""Read the lake at one transaction-consistent cut (`--consistent-cuts`, `cuts/manifest.py`).

    from spark_jobs.cuts.read import tables_at_cut
    tables = tables_at_cut(spark, "/lake")              # latest cut: {"public/orders": df, ...}
    tables = tables_at_cut(spark, "/lake", cut=cuts[3])  # any cut of read_cuts("/lake")

Each table is read at its Delta version of the cut (`versionAsOf`), so all of them show the
source as of one PostgreSQL commit. `arrow_tables_at_cut` does the same without Spark
(delta-rs, pyarrow). A table created after the cut is not in it; the job never vacuums, so
old versions stay readable until you VACUUM (keep the retention above the cut age you read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..lake.storage import options_for
from .manifest import Cut, read_cuts

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


class NoCut(LookupError):
    pass


def latest_cut(target: str, storage_options: Mapping[str, str] | None = None) -> Cut:
    """The newest cut recorded for `target`; NoCut when there is none."""
    cuts = read_cuts(target, storage_options)
    if not cuts:
        raise NoCut(f"no consistent cut recorded under {target.rstrip('/')}/_pgcdc/cuts "
                    "(is the merge job running with --consistent-cuts?)")
    return cuts[-1]


def tables_at_cut(spark: SparkSession, target: str, cut: Cut | None = None
                  ) -> dict[str, DataFrame]:
    """Every table of `cut` (default: the latest) as a DataFrame at its version."""
    cut = cut or latest_cut(target)
    root = target.rstrip("/")
    return {path: spark.read.format("delta").option("versionAsOf", version).load(
        f"{root}/{path}") for path, version in sorted(cut.versions.items())}


def arrow_tables_at_cut(target: str, cut: Cut | None = None,
                        storage_options: Mapping[str, str] | None = None,
                        **to_pyarrow: Any) -> dict[str, pa.Table]:
    """The same through delta-rs: {"<schema>/<table>": pyarrow Table} (`to_pyarrow`: e.g.
    columns=[...] or filters=[...] for `DeltaTable.to_pyarrow_table`)."""
    from deltalake import DeltaTable

    cut = cut or latest_cut(target, storage_options)
    root = target.rstrip("/")
    options = options_for(root) if storage_options is None else dict(storage_options)
    return {path: DeltaTable(f"{root}/{path}", version=version, storage_options=options
                             ).to_pyarrow_table(**to_pyarrow)
            for path, version in sorted(cut.versions.items())}
