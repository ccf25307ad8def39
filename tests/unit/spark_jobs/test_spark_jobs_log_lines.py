"""The job's own lines survive a shell's `> log 2>&1` (issue 25): `pgcdc merge` with its output
in a file opened for writing, spark-submit played by a stand-in that does with its file
descriptors what spark-submit's JVM does (spark_jobs/runtime/console.py): it runs the Python driver
with stdout and stderr piped into its own stdout, and log4j writes its stderr afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# The driver: the job's lines as merge.py writes them (logging and `say`, to `job_stderr()`).
DRIVER = """
import logging
from spark_jobs.runtime.console import job_stderr, say
err = job_stderr()
logging.basicConfig(level=logging.INFO, stream=err, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger("spark_jobs.runtime.job").info("batch 0: 3 events")
say(err, "1 batch(es), 3 event(s)")
"""

# spark-submit's JVM as far as file descriptors go.
SPARK_SUBMIT = f"""#!{sys.executable}
import os, subprocess, sys
env = {{**os.environ, "PYSPARK_GATEWAY_PORT": "1"}}
driver = subprocess.run([sys.executable, "-c", {DRIVER!r}], env=env, cwd={str(ROOT)!r},
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)
os.write(1, driver.stdout)  # PythonRunner's RedirectThread: to System.out
os.write(2, b"WARN log4j: " + b"x" * 400 + b"\\n")  # Spark's warnings, after the job's lines
"""

JOB_ARGS = ["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r",
            "--topic-prefix", "p", "--target", "/nonexistent/lake"]


@pytest.fixture
def spark_home(tmp_path: Path) -> Path:
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text(SPARK_SUBMIT)
    script.chmod(0o755)
    return home


def _run(cmd: list[str], spark_home: Path, log: Path, together: bool) -> str:
    """`cmd > log 2>&1`, or `cmd > log.out 2> log` (the job's lines are stderr's)."""
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PGCDC_SPARK_JARS": "/j/a.jar"}
    # What a shell's `>` opens: O_WRONLY | O_CREAT | O_TRUNC, no O_APPEND.
    with log.open("w") as err, log.with_suffix(".out").open("w") as out:
        done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=err if together else out,
                              stderr=subprocess.STDOUT if together else err, timeout=120)
    assert done.returncode == 0, log.read_text()
    return log.read_text()


@pytest.mark.parametrize("together", [True, False], ids=["2>&1", "2>"])
def test_pgcdc_merge_output_redirected_to_a_file_keeps_the_jobs_lines(
        spark_home: Path, tmp_path: Path, together: bool) -> None:
    text = _run([sys.executable, "-m", "connector.cli", "merge", *JOB_ARGS], spark_home,
                tmp_path / "merge.log", together)
    assert "INFO spark_jobs.runtime.job: batch 0: 3 events" in text
    assert "pgcdc merge: 1 batch(es), 3 event(s)" in text
    assert "WARN log4j: " in text


def test_spark_submit_itself_redirected_to_a_file_keeps_the_jobs_lines(
        spark_home: Path, tmp_path: Path) -> None:
    """Without `pgcdc merge` nobody sets O_APPEND: the job writes through the JVM instead."""
    text = _run([str(spark_home / "bin" / "spark-submit")], spark_home, tmp_path / "s.log",
                True)
    assert "INFO spark_jobs.runtime.job: batch 0: 3 events" in text
    assert "pgcdc merge: 1 batch(es), 3 event(s)" in text
    assert "WARN log4j: " in text
