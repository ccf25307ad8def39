"""The `delta` format: one Delta table per source table, kept as a mirror of it (one row per
key, following the upstream table's incarnations, with tombstones and Delta versions).

    mirror.py           the table the job holds (`DeltaMirror`: `TableSink` and `Mirror`), which
                        chooses the engine of each read and maintenance step
    state.py            what both engines know of a table between batches (`DeltaTableState`)
    spark_writer.py     its writes through Spark (`SparkDeltaSink`): any batch
    delta_rs_writer.py  its writes through delta-rs (`DeltaRsSink`): the fast path's batches

The format registry (`spark_jobs/sinks/__init__.py`) names this package: `open_sink` is its
factory, `list_tables` finds its tables in a lake."""

from .mirror import DeltaMirror as DeltaMirror
from .mirror import list_tables as list_tables
from .mirror import open_sink as open_sink
