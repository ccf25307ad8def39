"""Settings of issue 24 (connector/config.py, `pgcdc run` flags): the metrics bind address and
the policy for tables without a key, from the YAML file and the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.cli import build_parser
from connector.config import load
from connector.errors import ConfigError
from connector.tools.run import config_from_args

REQUIRED = {"dsn": "host=db", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r"}


def test_defaults() -> None:
    cfg = load(None, dict(REQUIRED), environ={})
    assert cfg.metrics_host == "0.0.0.0"
    assert cfg.keyless_tables == "refuse"


def test_from_the_yaml_file(tmp_path: Path) -> None:
    config = tmp_path / "pgcdc.yaml"
    config.write_text("metrics-host: 127.0.0.1\nkeyless_tables: full\n")
    cfg = load(str(config), dict(REQUIRED), environ={})
    assert (cfg.metrics_host, cfg.keyless_tables) == ("127.0.0.1", "full")


def test_from_the_command_line() -> None:
    args = build_parser().parse_args([
        "run", "--dsn", "host=db", "--bootstrap-servers", "k:9092", "--schema-registry-url",
        "http://r", "--metrics-host", "::1", "--keyless-tables", "skip"])
    cfg = config_from_args(args)
    assert (cfg.metrics_host, cfg.keyless_tables) == ("::1", "skip")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("keyless_tables", "ignore", "keyless_tables must be one of refuse, skip, full"),
    ("metrics_host", "", "metrics host '' is not an address"),
    ("metrics_host", "a b", "metrics host 'a b' is not an address"),
])
def test_wrong_values_are_one_line(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(None, {**REQUIRED, key: value}, environ={})


def test_kafka_timeout_from_yaml_and_flags(tmp_path: Path) -> None:
    """`--kafka-timeout-s`: how long pgcdc waits for Kafka before one line (default 30 s)."""
    assert load(None, dict(REQUIRED), environ={}).kafka_timeout_s == 30.0
    config = tmp_path / "pgcdc.yaml"
    config.write_text("kafka-timeout-s: 5\n")
    assert load(str(config), dict(REQUIRED), environ={}).kafka_timeout_s == 5
    args = build_parser().parse_args([
        "run", "--dsn", "host=db", "--bootstrap-servers", "k:9092", "--schema-registry-url",
        "http://r", "--kafka-timeout-s", "2.5"])
    assert config_from_args(args).kafka_timeout_s == 2.5
    with pytest.raises(ConfigError, match="kafka_timeout_s must be > 0 seconds"):
        load(None, {**REQUIRED, "kafka_timeout_s": 0}, environ={})


def test_schema_registry_attempts_from_yaml_and_flags(tmp_path: Path) -> None:
    """`--schema-registry-attempts`: tries of a registry request before one line (default 5)."""
    assert load(None, dict(REQUIRED), environ={}).schema_registry_attempts == 5
    config = tmp_path / "pgcdc.yaml"
    config.write_text("schema_registry_attempts: 2\n")
    assert load(str(config), dict(REQUIRED), environ={}).schema_registry_attempts == 2
    args = build_parser().parse_args([
        "run", "--dsn", "host=db", "--bootstrap-servers", "k:9092", "--schema-registry-url",
        "http://r", "--schema-registry-attempts", "1"])
    assert config_from_args(args).schema_registry_attempts == 1
    with pytest.raises(ConfigError, match="schema_registry_attempts must be >= 1"):
        load(None, {**REQUIRED, "schema_registry_attempts": 0}, environ={})
