"""The real entry points, one JVM launch each (a launch is most of the cost): `spark-submit
spark_jobs/merge.py` as `pgcdc merge` builds it, killed with SIGKILL part-way through (a crash),
then `pgcdc merge` resuming from its checkpoint until stopped with SIGTERM, with the lake and
its checkpoint in a bucket (S3 on moto) given as users give it (`--conf
spark.hadoop.fs.s3a.*` and the AWS variables); and `pgcdc merge`'s one-line errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka import Consumer, TopicPartition
from devstack.s3 import S3
from pyspark.sql import SparkSession

from spark_jobs.runtime.submit import spark_submit_command, submit_env
from tests.support import merge_scenario as scenario
from tests.support.merge import CdcPublisher, table_rows

# A line of Spark's own log at INFO (log4j's layout; the job's lines start with the year):
# the job's own progress lines vary with how many batches a run takes, Spark's must not come.
SPARK_INFO = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO ", re.M)

pytestmark = pytest.mark.e2e


class Bucket:
    """Reads of the job's files in the test bucket (boto3, as an operator would look)."""

    def __init__(self, s3: S3, bucket: str) -> None:
        env = s3.env()
        self.name = bucket
        self.client = boto3.client(
            "s3", endpoint_url=s3.endpoint, region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])

    def names(self, prefix: str) -> list[str]:
        """The file names right under `prefix/` (no folders)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=f"{prefix}/")
        return [o["Key"][len(prefix) + 1:] for page in pages for o in page.get("Contents", [])
                if "/" not in o["Key"][len(prefix) + 1:]]

    def text(self, key: str) -> str:
        return str(self.client.get_object(Bucket=self.name, Key=key)["Body"].read().decode())


def test_spark_submit_killed_mid_stream_then_resumed_by_pgcdc_merge_until_sigterm(
        s3a_spark: SparkSession, kafka, registry, s3: S3,  # type: ignore[no-untyped-def]
        s3_bucket: str, prefix: str, tmp_path: Path, spark_jar_paths: list[Path]) -> None:
    """1. spark-submit, SIGKILLed after its second batch: no shutdown hook, no graceful stop,
       its writer lease left behind in the bucket.
    2. `pgcdc merge`, as a service manager runs it, resumes from the bucket's checkpoint
       (taking over the dead job's lease on this host) and commits a batch up to the end of
       every partition; SIGTERM then stops it and spark-submit's JVM with it, quietly.
    The lake holds what was published, each undecodable event once, although a batch may have
    been cut by the kill and re-run."""
    spark = s3a_spark
    publisher = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    scenario.publish(publisher)
    target = f"s3a://{s3_bucket}/lake"
    args = ["--bootstrap-servers", kafka.bootstrap, "--schema-registry-url", registry.url,
            "--topic-prefix", prefix, "--target", target]
    # The store given once: the endpoint as Spark settings, the keys as AWS variables.
    store = {"spark.hadoop.fs.s3a.endpoint": s3.endpoint,
             "spark.hadoop.fs.s3a.path.style.access": "true",
             "spark.hadoop.fs.s3a.connection.ssl.enabled": "false"}
    env = submit_env({**os.environ, **s3.env(),
                      "PGCDC_SPARK_JARS": ",".join(map(str, spark_jar_paths))})
    del env["AWS_ENDPOINT_URL"]  # delta-rs takes the endpoint from Spark's setting
    cmd = spark_submit_command([*args, "--trigger", "1s", "--max-offsets-per-trigger", "8"],
                               driver_memory="1g", jars=[str(p) for p in spark_jar_paths],
                               conf=store)
    log = tmp_path / "killed.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    bucket = Bucket(s3, s3_bucket)
    checkpoint = "lake/_pgcdc/checkpoint"
    try:
        _wait(lambda: "1" in bucket.names(f"{checkpoint}/commits"), proc, log)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no shutdown hook, no graceful stop
        proc.wait()
    # It was stopped before the end: the batches of 8 records it committed hold fewer
    # records than were sent (so the second run has work left, and resumes it).
    killed_at = _last_commit(bucket, checkpoint)
    assert (killed_at + 1) * 8 < publisher.sent, (killed_at, publisher.sent)

    ends = _end_offsets(kafka.bootstrap, publisher.partitions)
    log = tmp_path / "resumed.stderr"
    conf = [arg for key, value in store.items() for arg in ("--conf", f"{key}={value}")]
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "connector.cli", "merge", "--driver-memory", "1g", *conf,
             *args, "--trigger", "1s"], env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        _wait(lambda: _committed_up_to(bucket, checkpoint, ends), proc, log)
        assert [p for p in _processes_mentioning(target) if p != proc.pid]  # the JVM runs
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    deadline = time.monotonic() + 30
    while _processes_mentioning(target) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_mentioning(target) == [], "spark-submit's JVM outlived pgcdc merge"
    err = log.read_text()
    assert not SPARK_INFO.search(err), err[-3000:]  # Spark's INFO chatter stays off

    dead = spark.read.parquet(f"{target}/_pgcdc/dead_letter").collect()
    assert len({(r["partition"], r["offset"]) for r in dead}) == len(dead)
    assert len(dead) == scenario.CORRUPT_EVENTS
    for table, rows in scenario.EXPECTED.items():
        assert table_rows(spark, f"{target}/{table}", scenario.KEYS[table]) == rows, table


def _wait(done: Callable[[], bool], proc: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + 420  # a loaded machine starts the JVM slowly
    while not done():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)


def _last_commit(bucket: Bucket, checkpoint: str) -> int:
    return max(int(n) for n in bucket.names(f"{checkpoint}/commits") if n.isdigit())


def _end_offsets(bootstrap: str, partitions: dict[str, int]) -> dict[str, dict[str, int]]:
    """Each topic's partitions' high watermarks (as Spark's offset log writes them)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "merge-submit-ends"})
    try:
        return {topic: {str(p): consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                               timeout=10)[1]
                        for p in range(count)}
                for topic, count in partitions.items()}
    finally:
        consumer.close()


def _committed_up_to(bucket: Bucket, checkpoint: str, ends: dict[str, dict[str, int]]
                     ) -> bool:
    """Whether the last committed batch read every partition up to `ends` (its offset log: a
    version line, the batch's metadata, then one line per source: topic -> partition -> end)."""
    try:
        batch = _last_commit(bucket, checkpoint)
        lines = bucket.text(f"{checkpoint}/offsets/{batch}").splitlines()
    except ValueError:  # nothing committed yet
        return False
    read = json.loads(lines[-1])
    return all(read.get(topic, {}).get(p, -1) >= end
               for topic, parts in ends.items() for p, end in parts.items())


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _merge(args: list[str], spark_jar_paths: list[Path],
           tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PGCDC_SPARK_JARS": ",".join(map(str, spark_jar_paths))}
    return subprocess.run(
        [sys.executable, "-m", "connector.cli", "merge", "--driver-memory", "1g",
         "--topic-prefix", "nothing", "--target", str(tmp_path / "lake"),
         "--trigger", "available-now", *args],
        env=env, capture_output=True, text=True, timeout=300)


def test_unreachable_kafka_or_registry_is_one_line(
        registry, kafka, tmp_path: Path, spark_jar_paths: list[Path]) -> None:  # type: ignore[no-untyped-def]
    """Said in seconds, as the last line of stderr, not after Spark's minutes of retries."""
    from devstack.ports import free_port

    dead = f"127.0.0.1:{free_port()}"
    for args, needle in (
            (["--bootstrap-servers", dead, "--schema-registry-url", registry.url],
             f"pgcdc merge: cannot connect to Kafka at {dead}"),
            (["--bootstrap-servers", kafka.bootstrap, "--schema-registry-url",
              f"http://{dead}/apis/ccompat/v7"], f"pgcdc merge: schema registry http://{dead}")):
        done = _merge(args, spark_jar_paths, tmp_path)
        assert done.returncode == 1, done.stderr[-3000:]
        assert done.stderr.strip().splitlines()[-1].startswith(needle), done.stderr[-3000:]
        assert "Traceback" not in done.stderr + done.stdout
        assert done.stderr.count("\n") < 30, done.stderr[-3000:]
    assert not (tmp_path / "lake").exists()  # nothing was started


def test_usage_error_before_any_jvm(tmp_path: Path, spark_jar_paths: list[Path]) -> None:
    done = _merge(["--bootstrap-servers", "k:1", "--schema-registry-url", "http://r",
                   "--format", "csv"], spark_jar_paths, tmp_path)
    assert done.returncode == 2
    assert "pgcdc merge: error: argument --format" in done.stderr
    assert "WARN" not in done.stderr  # no Spark was started
