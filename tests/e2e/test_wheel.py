"""The product outside the checkout: build the wheel, install it with its dependencies into a
fresh venv, and from a directory away from the repository run `pgcdc --version`, `pgcdc decode`
on a capture and a short real `pgcdc merge` -- on a real Spark standalone cluster (a master and
two workers from pyspark's own distribution, separate JVMs, 1 core and 1g each) into a lake
directory both workers reach; the Delta tables must equal what was published. Nothing may print
a dependency's warning. (One spark-submit serves both: the wheel's merge and the cluster.)"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from devstack.spark import standalone_cluster
from pyspark.sql import SparkSession

from connector import __version__
from tests.support import merge_scenario as scenario
from tests.support.merge import CdcPublisher, table_rows

pytestmark = pytest.mark.e2e

@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """`spark://127.0.0.1:PORT` of a master with two registered workers."""
    with standalone_cluster(tmp_path, workers=2) as url:
        yield url


REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "data" / "captures" / "pg18_basic.jsonl"


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: int = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd[:3]}: {done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `pgcdc` script of a clean venv holding only the wheel and its dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
         "-w", str(work / "dist"), str(REPO)], cwd=work)
    wheel = next((work / "dist").glob("pgcdc-*.whl"))
    # Not even pip in it: this pip installs into it (--python), with no byte-compiling of the
    # dependencies' thousands of modules (CPU time of the suite; nothing here depends on it).
    venv.create(work / "venv", with_pip=False)
    python = work / "venv" / "bin" / "python"
    # without the checkout on PYTHONPATH, where pip would take the in-tree build's metadata
    # for an installed pgcdc and skip the wheel
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile",
         f"{wheel}[spark]"], cwd=work, env=outside_env())
    return work / "venv" / "bin" / "pgcdc"


def outside_env() -> dict[str, str]:
    """No trace of the checkout: no PYTHONPATH, no SPARK_HOME of the dev venv."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "SPARK_HOME", "VIRTUAL_ENV", "PGCDC_SPARK_JARS")}


def test_version_and_decode(installed: Path, tmp_path: Path) -> None:
    version = run([str(installed), "--version"], cwd=tmp_path, env=outside_env())
    assert version.stdout.strip() == f"pgcdc {__version__}"
    decoded = run([str(installed), "decode", str(CAPTURE)], cwd=tmp_path, env=outside_env())
    assert '"type": "begin"' in decoded.stdout
    for out in (version, decoded):
        assert "Warning" not in out.stderr, out.stderr


def test_merge_on_a_standalone_cluster_from_the_wheel(
        installed: Path, cluster: str, spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path, spark_jar_paths: list[Path]) -> None:
    scenario.publish(CdcPublisher(kafka.bootstrap, registry.url, prefix))
    target = tmp_path / "lake"  # one directory: workers and driver share this machine's disk
    python = installed.parent / "python"  # the executors' Python: the wheel's venv
    done = run([str(installed), "merge", "--master", cluster, "--driver-memory", "1g",
                "--jars", ",".join(map(str, spark_jar_paths)),
                "--conf", "spark.executor.memory=768m", "--conf", "spark.executor.cores=1",
                "--conf", "spark.driver.host=127.0.0.1",
                "--bootstrap-servers", kafka.bootstrap, "--schema-registry-url", registry.url,
                "--topic-prefix", prefix, "--target", str(target), "--trigger", "available-now"],
               cwd=tmp_path, env={**outside_env(), "PYSPARK_PYTHON": str(python)})
    # The job's own lines on stderr, though spark-submit merges the driver's streams.
    assert "pgcdc merge:" in done.stderr and "event(s)" in done.stderr, done.stderr[-3000:]
    assert "pgcdc merge:" not in done.stdout
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    # the work ran on the workers' executors, not in the driver
    executors = list(tmp_path.glob("worker*/app-*/*/stderr"))
    assert len({p.parts[-4] for p in executors}) == 2, done.stderr[-2000:]
    for table, rows in scenario.EXPECTED.items():
        assert table_rows(spark, f"{target}/{table}", scenario.KEYS[table]) == rows, table
