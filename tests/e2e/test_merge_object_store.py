"""The merge job with its lake and checkpoint in a bucket (S3 on moto, `s3a://`), given the store
once as Spark users do (`fs.s3a.*` on the session): delta-rs takes the small batches there
(settings derived by spark_jobs/lake/storage.py), Spark the replay, the checkpoint is in the
bucket. Streaming in small batches equals the expected tables and a replay through Spark
alone, history tables included; a second job on the same lake is refused while the first
holds it. (A job killed mid-stream and resumed from the bucket's checkpoint:
test_merge_submit.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from deltalake import DeltaTable
from devstack.ports import free_port
from pyspark.sql import SparkSession

from connector.names import table_topic
from spark_jobs.history.sink import history_path
from spark_jobs.lake.lease import LakeBusy, Lease
from spark_jobs.lake.storage import options_for
from spark_jobs.rules.names import table_of
from spark_jobs.runtime.config import MergeConfig
from spark_jobs.runtime.query import run_merge, start_merge
from tests.support import merge_scenario as scenario
from tests.support.merge import CdcPublisher, all_tables, scrape_metrics, table_rows

pytestmark = pytest.mark.e2e


def _config(kafka: Any, registry: Any, prefix: str, target: str, **kw: Any) -> MergeConfig:
    return MergeConfig(bootstrap_servers=kafka.bootstrap, schema_registry_url=registry.url,
                       target=target, topic_prefix=prefix, history=("public.users",), **kw)


def _history(target: str, prefix: str) -> list[str]:
    path = history_path(target, table_of(table_topic(prefix, "public", "users")).path)
    rows = DeltaTable(path, storage_options=options_for(path)).to_pyarrow_table().to_pylist()
    return sorted(map(repr, (dict(sorted(r.items())) for r in rows)))


def _lake_status(s3: Any, kafka: Any, target: str, *args: str
                 ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "connector.cli", "lake", "status",
                           "--target", target, "--bootstrap-servers", kafka.bootstrap, *args],
                          env={**os.environ, **s3.env()}, capture_output=True, text=True,
                          timeout=120)


def test_a_lake_in_a_bucket_streams_replays_and_reports_its_status(
        s3a_spark: SparkSession, kafka: Any, registry: Any, prefix: str,
        s3_bucket: str, s3: Any) -> None:
    spark = s3a_spark
    publisher = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    scenario.publish(publisher)
    streamed = f"s3a://{s3_bucket}/streamed"  # its checkpoint: streamed/_pgcdc/checkpoint

    port = free_port()
    query, processor = start_merge(spark, _config(kafka, registry, prefix, streamed,
                                                  trigger="1s", max_offsets_per_trigger=20,
                                                  metrics_port=port, metrics_host="127.0.0.1"))
    try:
        deadline = time.monotonic() + 300  # a bound on a hang, not a timing assertion
        while processor.stats.batches < 2 and time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.2)
        # the lake is taken: a second job (another host's) is refused with one line
        other = Lease(streamed)
        other.host = "another-host"
        with pytest.raises(LakeBusy, match="writes the lake s3a://"):
            other.acquire(lambda message: None)
        idle = 0  # the query read everything: no data available, no batch running, twice
        while idle < 2:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, processor.stats.reports[-1:]
            status = query.status
            idle = idle + 1 if not (status["isDataAvailable"] or status["isTriggerActive"]) \
                else 0
            time.sleep(1.0)
        # The job's metrics, scraped as Prometheus does: the corrupt records are counted
        # under their topic, bytes read per topic, Spark's own Kafka lag is 0 once caught up.
        metric = scrape_metrics(port)
        users = table_topic(prefix, "public", "users")
        assert metric[f'pgcdc_merge_dead_letters_total{{topic="{users}"}}'] \
            == scenario.CORRUPT_EVENTS
        assert all(metric[f'pgcdc_merge_read_bytes_total{{topic="{topic}"}}'] > 0
                   for topic in (table_topic(prefix, *t.split("/"))
                                 for t in scenario.EXPECTED)), metric
        assert metric['pgcdc_merge_kafka_offsets_behind{stat="max"}'] == 0
    finally:
        query.stop()
        processor.close()
    assert processor.stats.batches >= 2 and processor.stats.fast_tables > 0
    for table, rows in scenario.EXPECTED.items():
        assert table_rows(spark, f"{streamed}/{table}", scenario.KEYS[table]) == rows, table

    # `pgcdc lake status`, as an operator runs it (no Spark; the store from the AWS variables):
    # every table applied; then a record the job has not read leaves one table behind.
    status = _lake_status(s3, kafka, streamed, "--json")
    assert status.returncode == 0, status.stderr
    tables = {t["table"]: t for t in json.loads(status.stdout)["tables"]}
    assert sorted(tables) == sorted(scenario.EXPECTED)
    assert all(t["behind"] == 0 and t["lag_s"] == 0 and t["version"] is not None
               for t in tables.values()), tables
    assert tables["public/users"]["dead_letters"] == scenario.CORRUPT_EVENTS
    assert tables["public/users"]["tombstones"] > 0
    publisher.send(users, (None, b"not yet applied"), partition=0)
    publisher.flush()
    time.sleep(1.5)
    late = _lake_status(s3, kafka, streamed, "--max-lag-s", "1")
    assert late.returncode == 3, late.stdout + late.stderr
    assert re.fullmatch(rf"pgcdc lake status: public/users is \d+\.\d s behind \(1 record\(s\) "
                        rf"of {re.escape(users)} not applied; --max-lag-s 1\)",
                        late.stderr.strip()), late.stderr

    replayed = f"s3a://{s3_bucket}/replayed"
    stats = run_merge(spark, _config(kafka, registry, prefix, replayed, replay=True,
                                     fast_merge="off"))
    assert stats.batches == 1 and stats.fast_tables == 0
    assert all_tables(spark, replayed, scenario.TABLES) == all_tables(
        spark, streamed, scenario.TABLES)
    assert _history(replayed, prefix) == _history(streamed, prefix)
    assert len(_history(streamed, prefix)) > len(scenario.EXPECTED["public/users"])
