"""`pgcdc run --metrics-port`: the Prometheus metrics the issue lists (events, bytes, lag,
delivery errors, flushed LSN) move with the stream and the snapshot; `table` labels hold the
table."""

from __future__ import annotations

import httpx
import pytest
from devstack.ports import free_port

from tests.support.cdc_checks import execute, stream_run
from tests.support.producer import current_lsn, scrape_metrics

pytestmark = pytest.mark.integration


def test_metrics_follow_the_stream(postgres, producer_run, log_dir) -> None:
    port = free_port()
    run = stream_run(producer_run, "--metrics-port", str(port))
    table = f"metrics_{run.tag}"
    topic = f"{run.prefix}.public.{table}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            f"UPDATE {table} SET v = 'z' WHERE id = 1", f"DELETE FROM {table} WHERE id = 2")
    end = current_lsn(postgres.dsn)
    run.wait_confirmed(end)
    samples = scrape_metrics(port)
    for op, count in (("c", 3), ("u", 1), ("d", 1)):
        assert samples[f'pgcdc_events_total{{op="{op}",table="public.{table}"}}'] == count, \
            samples
    assert not any(topic in name for name in samples), samples
    assert samples["pgcdc_connected"] == 1
    assert samples["pgcdc_transactions_total"] == 3
    assert samples["pgcdc_bytes_total"] > 5 * 20
    assert samples["pgcdc_flushed_lsn"] >= end
    assert 0 <= samples["pgcdc_lag_ms"] < 600_000
    assert samples["pgcdc_delivery_errors_total"] == 0
    assert run.stop() == 0


def test_metrics_count_the_snapshot(postgres, producer_run, log_dir) -> None:
    port = free_port()
    run = producer_run("-", "--metrics-port", str(port))
    run.tables = f"public.*{run.tag}*"
    table = f"snapmetrics_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, v text)",
            f"INSERT INTO {table} SELECT i, repeat('x', 50) FROM generate_series(1, 200) i")
    run.start(log_dir)  # returns once streaming: the snapshot is done
    samples = scrape_metrics(port)
    assert samples[f'pgcdc_events_total{{op="r",table="public.{table}"}}'] == 200, samples
    assert samples["pgcdc_bytes_total"] > 200 * 50
    assert samples["pgcdc_snapshot_tables"] == 1
    assert samples["pgcdc_snapshot_tables_done"] == 1
    assert samples["pgcdc_snapshot_rows"] == 200
    assert samples["pgcdc_transactions_total"] == 0  # the snapshot is not a transaction
    assert samples["pgcdc_connected"] == 1
    assert run.stop() == 0


def test_metrics_bind_the_chosen_address(postgres, producer_run, log_dir) -> None:
    """--metrics-host: /metrics answers on that address only (127.0.0.2 is loopback too)."""
    port = free_port()
    run = stream_run(producer_run, "--metrics-port", str(port), "--metrics-host", "127.0.0.2")
    execute(postgres.dsn, f"CREATE TABLE metricshost_{run.tag} (id int PRIMARY KEY)")
    run.start(log_dir)
    samples = scrape_metrics(port, host="127.0.0.2")
    assert samples["pgcdc_connected"] == 1
    with pytest.raises(httpx.ConnectError):  # refused at once: nothing listens there
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert run.stop() == 0


def test_an_unknown_metrics_host_is_one_line(postgres, producer_run, log_dir) -> None:
    run = stream_run(producer_run, "--metrics-port", str(free_port()),
                     "--metrics-host", "192.0.2.1")  # TEST-NET: no interface has it
    run.start(log_dir, wait=False)
    assert run.proc is not None and run.proc.wait(60) == 1
    lines = run.output().strip().splitlines()
    assert lines[-1].startswith("pgcdc run: cannot serve metrics on port"), lines
    assert "192.0.2.1" in lines[-1]
