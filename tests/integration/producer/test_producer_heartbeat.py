"""`--heartbeat-interval-s`: each heartbeat is written to `<prefix>.heartbeat` (heartbeat.avsc)
with the LSN confirmed so far and the slot's restart_lsn, and counts as no transaction of the
user's."""

from __future__ import annotations

import pytest
from devstack.ports import free_port

from tests.support.cdc_checks import execute, read_records, stream_run
from tests.support.producer import current_lsn, scrape_metrics

pytestmark = pytest.mark.integration


def test_heartbeats_are_written_to_the_heartbeat_topic(postgres, producer_run, log_dir) -> None:
    port = free_port()
    run = stream_run(producer_run, "--heartbeat-interval-s", "0.3", "--metrics-port", str(port))
    table = f"beat_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    run.start(log_dir)
    beats = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.heartbeat",
                         min_count=3, idle_s=0, timeout=30)
    assert len(beats) >= 3
    for beat in beats:
        assert beat.key is None
        assert beat.value["name"] == run.prefix
        assert beat.value["db"]
        assert beat.value["ts_ms"] > 0
    lsns = [beat.value["lsn"] for beat in beats]
    assert lsns == sorted(lsns) and lsns[-1] > 0
    # the slot's restart_lsn when each was emitted: it only moves forward
    restarts = [beat.value["restart_lsn"] for beat in beats]
    assert restarts == sorted(restarts) and 0 < restarts[-1] <= current_lsn(postgres.dsn)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1)")
    run.wait_confirmed(current_lsn(postgres.dsn))
    assert scrape_metrics(port)["pgcdc_transactions_total"] == 1  # the heartbeats are not counted
    assert run.stop() == 0
