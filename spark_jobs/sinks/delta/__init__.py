"""The `delta` format: one Delta table per source table, kept as a mirror of it (one row per
key, following the upstream table's incarnations, with tombstones and Delta versions).

    state.py            what both engines know of a table between batches (`DeltaTableState`)
    spark_writer.py     its writes through Spark (`SparkDeltaSink`): any batch
    delta_rs_writer.py  its writes through delta-rs (`DeltaRsSink`): the fast path's batches

The format registry (`spark_jobs/sinks/__init__.py`) names this package; `open_sink` is its
factory."""

from .spark_writer import open_sink as open_sink
