"""`pgcdc verify` and the value-for-value comparison: compare, canonical row text (canon),
the PostgreSQL side (source_side), the lake side (lake_side), verdicts (report), online."""
