"""The merge job on a real Spark standalone cluster: a master and two workers from pyspark's own
distribution (separate JVMs, 1 core and 1g each), `pgcdc merge --master spark://...` into a lake
directory both workers reach; the Delta tables must equal what was published."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from devstack.ports import free_port
from pyspark.sql import SparkSession

from tests.support import merge_scenario as scenario
from tests.support.merge import CdcPublisher, table_rows

pytestmark = pytest.mark.e2e

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def start(cls: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_DAEMON_MEMORY": "256m"}
    with log.open("wb") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), cls, *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """`spark://127.0.0.1:PORT` of a master with two registered workers."""
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log = tmp_path / "master.log"
    procs = [start("org.apache.spark.deploy.master.Master",
                   ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
                   master_log)]
    try:
        for n in (1, 2):
            procs.append(start("org.apache.spark.deploy.worker.Worker",
                               ["--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                "--webui-port", str(free_port()),
                                "--work-dir", str(tmp_path / f"worker{n}"), url],
                               tmp_path / f"worker{n}.log"))
        deadline = time.monotonic() + 180
        while master_log.read_text(errors="replace").count("Registering worker") < 2:
            assert all(p.poll() is None for p in procs), master_log.read_text()[-3000:]
            assert time.monotonic() < deadline, master_log.read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        for p in procs:
            os.killpg(p.pid, 15)
        for p in procs:
            p.wait(30)


def test_merge_on_a_standalone_cluster(
        cluster: str, spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path,
        spark_jar_paths: list[Path]) -> None:
    scenario.publish(CdcPublisher(kafka.bootstrap, registry.url, prefix))
    target = tmp_path / "lake"  # one directory: workers and driver share this machine's disk
    done = subprocess.run(
        [sys.executable, "-m", "connector.cli", "merge", "--master", cluster,
         "--driver-memory", "1g", "--jars", ",".join(map(str, spark_jar_paths)),
         "--conf", "spark.executor.memory=768m", "--conf", "spark.executor.cores=1",
         "--conf", "spark.driver.host=127.0.0.1",
         "--bootstrap-servers", kafka.bootstrap, "--schema-registry-url", registry.url,
         "--topic-prefix", prefix, "--target", str(target), "--trigger", "available-now"],
        env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # the work ran on the workers' executors, not in the driver
    executors = list(tmp_path.glob("worker*/app-*/*/stderr"))
    assert len({p.parts[-4] for p in executors}) == 2, done.stderr[-2000:]
    for table, rows in scenario.EXPECTED.items():
        assert table_rows(spark, f"{target}/{table}", scenario.KEYS[table]) == rows, table
