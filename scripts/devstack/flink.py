"""Flink SQL for tests/e2e/test_flink_debezium.py: PyFlink in a venv of its own, and the SQL
jars (scripts/jars/flink.pom.xml), both in the stack cache.

PyFlink (``apache-flink`` from PyPI, which brings Flink itself) cannot share the project's
.venv (so it is not in pyproject's extras): it pins pyarrow < 21, pandas < 2.3 and
apache-beam <= 2.61, where the merge job's deltalake[pyarrow] needs pyarrow >= 21. So it gets
``<cache>/pyflink-<version>/``, made once (pip, from PyPI) by ``scripts/stack fetch`` (which
``make bootstrap`` and so ``make test`` run), and the test runs its Flink SQL there as a
subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .errors import StackError
from .maven import resolve_pom

PYFLINK_VERSION = "2.2.0"  # matches flink-sql-connector-kafka 5.0.0-2.2 (flink.pom.xml)
FLINK_POM = "flink.pom.xml"


def pyflink_python(cache: Path) -> Path:
    """The interpreter of the PyFlink venv (made on first use)."""
    venv = cache / f"pyflink-{PYFLINK_VERSION}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    base = shutil.which("python3") or sys.executable
    for cmd in ([base, "-m", "venv", str(venv)],
                [str(python), "-m", "pip", "install", "-q", f"apache-flink=={PYFLINK_VERSION}"]):
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines() or ["(no output)"]
            raise StackError(f"cannot install PyFlink {PYFLINK_VERSION} into {venv}: "
                             f"{lines[-1][:300]}")
    (venv / ".complete").touch()
    return python


def flink_jars(cache: Path) -> list[Path]:
    """The Kafka connector and the debezium-avro-confluent format jars."""
    return sorted(resolve_pom(cache, FLINK_POM).glob("*.jar"))


def fetch(cache: Path) -> None:
    flink_jars(cache)
    pyflink_python(cache)
