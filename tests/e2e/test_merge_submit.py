"""The real entry point: `spark-submit spark_jobs/merge.py` as `pgcdc merge` builds it, killed
with SIGKILL part-way through (a crash), then run again to completion from its checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.submit import spark_submit_command, submit_env
from tests.support import merge_scenario as scenario
from tests.support.merge import CdcPublisher, table_rows

pytestmark = pytest.mark.e2e


def test_spark_submit_killed_mid_stream_then_resumed(
        spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path, spark_jar_paths: list[Path]) -> None:
    publisher = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    scenario.publish(publisher)
    target = tmp_path / "lake"
    args = ["--bootstrap-servers", kafka.bootstrap, "--schema-registry-url", registry.url,
            "--topic-prefix", prefix, "--target", str(target)]
    env = submit_env({**os.environ, "PGCDC_SPARK_JARS": ",".join(map(str, spark_jar_paths))})
    cmd = spark_submit_command([*args, "--trigger", "1s", "--max-offsets-per-trigger", "8"],
                               driver_memory="1g", jars=[str(p) for p in spark_jar_paths])
    log = tmp_path / "first.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    commits = target / "_pgcdc" / "checkpoint" / "commits"
    try:
        deadline = time.monotonic() + 420  # a loaded machine starts the JVM slowly
        while not (commits / "1").exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no shutdown hook, no graceful stop
        proc.wait()
    # It was stopped before the end: the batches of 8 records it committed hold fewer
    # records than were sent (so the second run has work left, and resumes it).
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    assert (last + 1) * 8 < publisher.sent, (last, publisher.sent)

    done = subprocess.run(spark_submit_command([*args, "--trigger", "available-now"],
                                               driver_memory="1g",
                                               jars=[str(p) for p in spark_jar_paths]),
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = [line for line in done.stderr.splitlines() if line.startswith("pgcdc merge:")]
    assert any("event(s)" in line for line in summary), done.stderr[-3000:]
    assert "pgcdc merge:" not in done.stdout
    # each undecodable event once, though a batch may have been cut by the kill and re-run
    dead = spark.read.parquet(str(target / "_pgcdc" / "dead_letter")).collect()
    assert len({(r["partition"], r["offset"]) for r in dead}) == len(dead)
    assert len(dead) == scenario.CORRUPT_EVENTS
    for table, rows in scenario.EXPECTED.items():
        assert table_rows(spark, f"{target}/{table}", scenario.KEYS[table]) == rows, table


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_sigterm_to_pgcdc_merge_stops_the_jvm(
        kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path, spark_jar_paths: list[Path]) -> None:
    """A service manager stops `pgcdc merge` with SIGTERM: spark-submit's JVM goes too."""
    scenario.publish(CdcPublisher(kafka.bootstrap, registry.url, prefix))
    target = tmp_path / "lake-sigterm"
    env = {**os.environ, "PGCDC_SPARK_JARS": ",".join(map(str, spark_jar_paths))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "connector.cli", "merge", "--driver-memory", "1g",
         "--bootstrap-servers", kafka.bootstrap, "--schema-registry-url", registry.url,
         "--topic-prefix", prefix, "--target", str(target), "--trigger", "1s"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    commits = target / "_pgcdc" / "checkpoint" / "commits"
    try:
        deadline = time.monotonic() + 420  # a loaded machine starts the JVM slowly
        while not (commits / "0").exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert [p for p in _processes_mentioning(str(target)) if p != proc.pid]  # the JVM runs
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    deadline = time.monotonic() + 30
    while _processes_mentioning(str(target)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_mentioning(str(target)) == [], "spark-submit's JVM outlived pgcdc merge"
    assert err.count("\n") < 50, err[-3000:]  # Spark's INFO chatter stays off


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
