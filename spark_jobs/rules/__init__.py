"""The merge rules, pure (no IO): what a batch of change events means for a table.

names (topics, columns), changes (order, truncates, latest per key), fold (the same over Python
rows), plan (the MERGE as data), incarnation, widening (type changes), expiry (tombstones),
cut_policy (transaction-consistent cuts). Imports nothing else of spark_jobs."""
