"""docker-compose.yml cannot run here (no Docker engine); keep it valid and consistent."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_the_whole_stack() -> None:
    services = _compose()["services"]
    assert {"postgres", "kafka", "registry", "producer", "merge"} <= services.keys()
    assert "wal_level=logical" in services["postgres"]["command"]
    assert int(services["postgres"]["image"].split(":")[1]) >= 16


def test_compose_uses_the_local_stack_env_names_and_ports() -> None:
    compose = _compose()
    for name in ("producer", "merge"):
        env = compose["services"][name]["environment"]
        assert {"PGCDC_DSN", "KAFKA_BOOTSTRAP_SERVERS", "SCHEMA_REGISTRY_URL"} <= env.keys()
        assert env["SCHEMA_REGISTRY_URL"].endswith("/apis/ccompat/v7")
    ports = {p for svc in compose["services"].values() for p in svc.get("ports", [])}
    assert {"15432:5432", "19092:19092", "18081:8080"} <= ports


def test_compose_builds_from_files_that_exist() -> None:
    for name in ("producer", "merge"):
        build = _compose()["services"][name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).is_file()
