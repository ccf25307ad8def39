"""Prometheus metrics of the producer (served on --metrics-port when set).

`table` labels hold the PostgreSQL table as ``schema.table``; bytes and events count the
snapshot as well as the stream."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, start_http_server

EVENTS = Counter("pgcdc_events_total", "Change events published (op r: snapshot rows)",
                 ["table", "op"])
BYTES = Counter("pgcdc_bytes_total", "Bytes (key + value) of events published, snapshot included")
DELIVERY_ERRORS = Counter("pgcdc_delivery_errors_total", "Kafka delivery failures")
FLUSHED_LSN = Gauge("pgcdc_flushed_lsn", "Last LSN confirmed to PostgreSQL as flushed")
LAG_BYTES = Gauge("pgcdc_lag_bytes", "Server WAL end minus the confirmed flush LSN")
LAG_MS = Gauge("pgcdc_lag_ms", "Milliseconds between a transaction's commit and its publication")
TRANSACTIONS = Counter("pgcdc_transactions_total",
                       "Transactions that published at least one record")
SNAPSHOT_TABLES = Gauge("pgcdc_snapshot_tables", "Tables in the running or last snapshot")
SNAPSHOT_TABLES_DONE = Gauge("pgcdc_snapshot_tables_done",
                             "Tables of the running or last snapshot read completely")
SNAPSHOT_ROWS = Gauge("pgcdc_snapshot_rows", "Rows read by the running or last snapshot")
VALUES_FALLBACK = Counter("pgcdc_values_fallback_total",
                          "Values published by the fallback rule (exact text, or null for a "
                          "typed column) because their type mapping refused them",
                          ["table", "column"])
EVENTS_OVERSIZED = Counter("pgcdc_events_oversized_total",
                           "Events over --max-event-bytes published with their largest columns "
                           "null (--oversized-events omit; header pgcdc.omitted)", ["table"])
DDL_RESYNCS = Counter("pgcdc_ddl_resyncs_total", "Incremental snapshots queued because DDL "
                      "changed a table's existing rows (resync_on_ddl)", ["table"])
KEYLESS_LEFT_OUT = Gauge("pgcdc_keyless_tables_left_out",
                         "Tables matching --tables left out of the publication pgcdc manages "
                         "because they have no primary key (--keyless-tables refuse or skip; "
                         "they join, with a snapshot, once they have a key or a replica "
                         "identity)")
CONNECTED = Gauge("pgcdc_connected", "1 while the replication stream is connected, else 0")


def serve(port: int, host: str = "0.0.0.0") -> None:
    """Serve /metrics on `host`:`port` (nothing when `port` is 0)."""
    if port > 0:
        start_http_server(port, addr=host)
