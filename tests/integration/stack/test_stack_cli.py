"""`scripts/stack up | status | env | down` as a user runs it, on its own directory and ports."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
from devstack import process
from devstack.ports import free_port, is_listening

pytestmark = pytest.mark.integration

STACK = Path(__file__).resolve().parents[3] / "scripts" / "stack"


def _stack(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STACK), *args], env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def stack_env(work_dir: Path) -> dict[str, str]:
    base = Path(tempfile.mkdtemp(prefix="cli-stack-", dir=work_dir))
    base.chmod(0o755)
    kafka_port = free_port()
    return {
        **os.environ,
        "PGCDC_PYTHON": sys.executable,
        "PGCDC_STACK_DIR": str(base),
        "PGCDC_STACK_PG_PORT": str(free_port()),
        "PGCDC_STACK_KAFKA_PORT": str(kafka_port),
        "PGCDC_STACK_REGISTRY_PORT": str(free_port()),
        "PGCDC_STACK_S3_PORT": str(free_port()),
    }


def test_up_env_status_down_leaves_nothing_behind(stack_env: dict[str, str]) -> None:
    up = _stack(stack_env, "up")
    try:
        assert up.returncode == 0, up.stderr
        # Idempotent: a second `up` finds everything running and succeeds.
        assert _stack(stack_env, "up").returncode == 0
        status = _stack(stack_env, "status")
        assert status.returncode == 0 and status.stdout.count("running") == 4, status.stdout
        env = _stack(stack_env, "env").stdout
        for name in ("PGCDC_DSN", "KAFKA_BOOTSTRAP_SERVERS", "SCHEMA_REGISTRY_URL",
                     "PGCDC_SPARK_JARS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                     "AWS_REGION"):
            assert f"export {name}=" in env
        s3_port = stack_env["PGCDC_STACK_S3_PORT"]
        assert f"export AWS_ENDPOINT_URL=http://127.0.0.1:{s3_port}\n" in env
        assert "export PGCDC_LAKE=s3a://lake/" in env
        with urllib.request.urlopen(f"http://127.0.0.1:{s3_port}/") as resp:  # ListBuckets
            assert b"<Name>lake</Name>" in resp.read()  # `up` created the lake's bucket
        base = Path(stack_env["PGCDC_STACK_DIR"])
        pids = [int((base / svc / f"{svc}.pid").read_text()) for svc in ("kafka", "registry", "s3")]
        pids.append(int((base / "postgres" / "data" / "postmaster.pid").read_text().split()[0]))
    finally:
        down = _stack(stack_env, "down")
    assert down.returncode == 0, down.stderr
    assert not any(process.alive(pid) for pid in pids)
    for key in ("PGCDC_STACK_PG_PORT", "PGCDC_STACK_KAFKA_PORT", "PGCDC_STACK_REGISTRY_PORT",
                "PGCDC_STACK_S3_PORT"):
        assert not is_listening(int(stack_env[key]))
    assert _stack(stack_env, "status").returncode == 1


def test_taken_port_is_one_clear_line(stack_env: dict[str, str]) -> None:
    import socket

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", int(stack_env["PGCDC_STACK_KAFKA_PORT"])))
        blocker.listen()
        up = _stack(stack_env, "up")
    _stack(stack_env, "down")
    assert up.returncode == 1
    last = up.stderr.strip().splitlines()[-1]
    assert "port" in last and "PGCDC_STACK_KAFKA_PORT" in last and "Traceback" not in up.stderr


def test_unknown_command_prints_usage(stack_env: dict[str, str]) -> None:
    result = _stack(stack_env, "sideways")
    assert result.returncode == 2 and "usage" in result.stderr
