"""Build (and run) the spark-submit command of the merge job with the right jars.

`pgcdc merge ARGS...` calls `main(ARGS)`; `python -m spark_jobs.submit ARGS...` does the same.
Jars come from `PGCDC_SPARK_JARS` (comma- or path-separated list) or, in a checkout, the cache
`scripts/stack` resolves (`.stack/cache/spark`, or `PGCDC_STACK_CACHE`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MERGE_SCRIPT = Path(__file__).resolve().parent / "merge.py"
JARS_ENV = "PGCDC_SPARK_JARS"

# Modest local defaults; a cluster user passes --master and --conf of their own.
DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
}


class SubmitError(RuntimeError):
    pass


def resolve_jars(env: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if env is None else env
    listed = env.get(JARS_ENV, "").strip()
    if listed:
        sep = "," if "," in listed else os.pathsep
        return [j.strip() for j in listed.split(sep) if j.strip()]
    scripts = REPO / "scripts"
    if not (scripts / "devstack").is_dir():
        raise SubmitError(f"set {JARS_ENV} to the Kafka, Avro and Delta jars (comma-separated)")
    sys.path.insert(0, str(scripts))
    try:
        from devstack.spark import spark_jars  # type: ignore[import-not-found]
        from devstack.stack import cache_dir  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(scripts))
    jars = [str(p) for p in spark_jars(cache_dir())]
    if not jars:
        raise SubmitError(f"no jars resolved; run scripts/stack fetch or set {JARS_ENV}")
    return jars


def spark_submit_binary(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("SPARK_HOME"):
        return str(Path(env["SPARK_HOME"]) / "bin" / "spark-submit")
    beside = Path(sys.executable).parent / "spark-submit"  # pyspark's, in this venv
    if beside.exists():
        return str(beside)
    found = shutil.which("spark-submit")
    if not found:
        raise SubmitError("spark-submit not found: install pyspark or set SPARK_HOME")
    return found


def spark_submit_command(job_args: Sequence[str], jars: Sequence[str] | None = None,
                         master: str | None = "local[2]", driver_memory: str | None = "2g",
                         conf: Mapping[str, str] | None = None,
                         spark_submit: str | None = None) -> list[str]:
    """`spark-submit --jars ... [--master M] [--conf k=v]... spark_jobs/merge.py ARGS`."""
    cmd = [spark_submit or spark_submit_binary(), "--jars", ",".join(jars or resolve_jars())]
    if master:
        cmd += ["--master", master]
    if driver_memory:
        cmd += ["--driver-memory", driver_memory]
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(MERGE_SCRIPT), *job_args]


def submit_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment: Python workers run the same interpreter as this process."""
    out = dict(os.environ if env is None else env)
    out.setdefault("PYSPARK_PYTHON", sys.executable)
    out.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        cmd = spark_submit_command(args)
    except SubmitError as exc:
        print(f"pgcdc merge: {exc}", file=sys.stderr)
        return 2
    return subprocess.call(cmd, env=submit_env())


if __name__ == "__main__":
    sys.exit(main())
