"""Merge job: Kafka topics of pgcdc change events into Delta Lake tables (or a Parquet change log).

Data flow of one micro-batch (see `runtime/job.py`):

    Kafka rows → wire (Confluent header: magic byte, schema id)
               → decode (writer schema per id from the registry, `from_avro` per (topic, id))
               → changes (order by (commit_lsn, txn_index), truncate placement, latest per key,
                          unchanged-TOAST carry-forward)
               → plan (MERGE conditions and assignments) → sinks/delta / parquet_sink
    undecodable rows → dead_letter
"""

import connector  # noqa: F401,E402  (its filter of a dependency's import-time warning applies here too)
