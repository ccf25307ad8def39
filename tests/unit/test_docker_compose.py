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


def test_every_service_has_a_healthcheck() -> None:
    for name, service in _compose()["services"].items():
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name} has no healthcheck"


def test_services_wait_for_healthy_dependencies() -> None:
    for name, service in _compose()["services"].items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition == {"condition": "service_healthy"}, f"{name} -> {dependency}"


def test_named_volumes_are_declared_and_keep_the_state() -> None:
    compose = _compose()
    declared = set(compose["volumes"])
    mounted = {}
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            assert source in declared, f"{name} mounts undeclared volume {source}"
            mounted[name] = target
    assert mounted["postgres"] == "/var/lib/postgresql/data"
    assert mounted["kafka"] == compose["services"]["kafka"]["environment"]["KAFKA_LOG_DIRS"]
    assert mounted["merge"] == "/lake"


def test_the_registry_keeps_its_schemas_in_a_database_on_a_volume() -> None:
    services = _compose()["services"]
    env = services["registry"]["environment"]
    assert env["APICURIO_STORAGE_KIND"] == "sql"
    database = env["APICURIO_DATASOURCE_URL"].split("//")[1].split(":")[0]
    assert database in services and services[database]["volumes"]
    assert env["APICURIO_DATASOURCE_USERNAME"] == services[database]["environment"]["POSTGRES_USER"]


def test_image_tags_are_pinned() -> None:
    for name, service in _compose()["services"].items():
        if "image" in service:
            _, _, tag = service["image"].partition(":")
            assert tag and tag != "latest", f"{name}: {service['image']}"


def _dockerfile() -> str:
    return (ROOT / "scripts" / "docker" / "Dockerfile").read_text()


def test_dockerfile_base_is_a_pinned_debian_release_with_a_jdk() -> None:
    text = _dockerfile()
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in text
    assert "openjdk-17-jre-headless" in text  # in bookworm, gone from trixie


def test_dockerfile_installs_a_wheel_built_with_a_compiler() -> None:
    text = _dockerfile()
    build, _, runtime = text.partition("AS runtime")
    assert "gcc" in build and "python -m build --wheel" in build
    assert "/wheels/pgcdc-" in runtime and "-e " not in runtime
    for copied in ("COPY connector", "COPY spark_jobs"):  # no source checkout at run time
        assert copied not in runtime


def test_dockerfile_copies_only_files_that_exist() -> None:
    for line in _dockerfile().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), line
