"""Writing a batch's changes: Delta through Spark (delta_sink), Delta through delta-rs
(fast_sink, the fast path), the Parquet change log (parquet_sink), dead letters."""
