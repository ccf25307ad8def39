"""The jars the merge job adds to Spark (Kafka source, Avro, Delta), resolved ahead of time;
a Spark standalone cluster on this machine for tests and benchmarks."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .maven import resolve_pom
from .ports import free_port

_VERSION_SUFFIX = re.compile(r"-\d[^/]*\.jar$")


def artifact_name(jar: Path) -> str:
    """`jackson-core-2.13.5.jar` -> `jackson-core`."""
    return _VERSION_SUFFIX.sub("", jar.name)


def pyspark_artifacts() -> set[str]:
    try:
        import pyspark
    except ImportError:
        return set()
    return {artifact_name(p) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def spark_jars(cache: Path) -> list[Path]:
    """Jars to pass to spark-submit --jars: ours minus any artifact pyspark already ships
    (in whatever version: two versions of one library on the classpath break Spark)."""
    shipped = pyspark_artifacts()
    return sorted(p for p in resolve_pom(cache, "spark.pom.xml").glob("*.jar")
                  if artifact_name(p) not in shipped)


@contextmanager
def standalone_cluster(work: Path, workers: int = 2, cores: int = 1,
                       memory: str = "1g") -> Iterator[str]:
    """`spark://127.0.0.1:PORT` of a master with `workers` registered workers (pyspark's own
    distribution, separate JVMs, `cores` and `memory` each, their logs and work dirs under
    `work`); everything stopped on exit."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_DAEMON_MEMORY": "256m"}

    def start(cls: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen([str(home / "bin" / "spark-class"), cls, *args], env=env,
                                    stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log = work / "master.log"
    procs = [start("org.apache.spark.deploy.master.Master",
                   ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())],
                   master_log)]
    try:
        for n in range(1, workers + 1):
            procs.append(start("org.apache.spark.deploy.worker.Worker",
                               ["--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                "--webui-port", str(free_port()),
                                "--work-dir", str(work / f"worker{n}"), url],
                               work / f"worker{n}.log"))
        deadline = time.monotonic() + 180
        while master_log.read_text(errors="replace").count("Registering worker") < workers:
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError("the Spark standalone cluster did not start: "
                                   + master_log.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        for p in procs:
            os.killpg(p.pid, 15)
        for p in procs:
            p.wait(30)
