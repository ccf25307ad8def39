"""The product outside the checkout: build the wheel, install it with its dependencies into a
fresh venv, and from a directory away from the repository run `pgcdc --version`, `pgcdc decode`
on a capture and a short real `pgcdc merge`. Nothing may print a dependency's warning."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from connector import __version__
from tests.support import merge_scenario as scenario
from tests.support.merge import CdcPublisher

pytestmark = pytest.mark.e2e

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
    venv.create(work / "venv", with_pip=True)
    python = work / "venv" / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", f"{wheel}[spark]"], cwd=work)
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


def test_merge_short_real_run(installed: Path, tmp_path: Path, kafka, registry,  # type: ignore[no-untyped-def]
                              prefix: str,
                              spark_jar_paths: list[Path]) -> None:
    scenario.publish(CdcPublisher(kafka.bootstrap, registry.url, prefix))
    target = tmp_path / "lake"
    done = run([str(installed), "merge", "--driver-memory", "1g",
                "--jars", ",".join(map(str, spark_jar_paths)),
                "--bootstrap-servers", kafka.bootstrap, "--schema-registry-url", registry.url,
                "--topic-prefix", prefix, "--target", str(target), "--trigger", "available-now"],
               cwd=tmp_path, env=outside_env())
    # The job's own lines on stderr, though spark-submit merges the driver's streams.
    assert "pgcdc merge:" in done.stderr and "event(s)" in done.stderr, done.stderr[-3000:]
    assert "pgcdc merge:" not in done.stdout
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    for table in scenario.EXPECTED:
        assert (target / table / "_delta_log").is_dir(), table
