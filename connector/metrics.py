"""Prometheus metrics of the producer (served on --metrics-port when set)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, start_http_server

EVENTS = Counter("pgcdc_events_total", "Change events published", ["table", "op"])
BYTES = Counter("pgcdc_bytes_total", "Bytes of Avro-encoded events published")
DELIVERY_ERRORS = Counter("pgcdc_delivery_errors_total", "Kafka delivery failures")
FLUSHED_LSN = Gauge("pgcdc_flushed_lsn", "Last LSN confirmed to PostgreSQL as flushed")
LAG_BYTES = Gauge("pgcdc_lag_bytes", "Server WAL end minus the confirmed flush LSN")
LAG_MS = Gauge("pgcdc_lag_ms", "Milliseconds between a transaction's commit and its publication")
TRANSACTIONS = Counter("pgcdc_transactions_total", "Transactions published")


def serve(port: int) -> None:
    if port > 0:
        start_http_server(port, addr="0.0.0.0")
