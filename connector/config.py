"""`pgcdc run` configuration: defaults < environment < YAML file < command-line flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from connector.errors import ConfigError

ENV_DEFAULTS = {
    "dsn": "PGCDC_DSN",
    "bootstrap_servers": "KAFKA_BOOTSTRAP_SERVERS",
    "schema_registry_url": "SCHEMA_REGISTRY_URL",
}

SNAPSHOT_MODES = ("initial", "never", "initial_only")


@dataclass
class Config:
    dsn: str = ""
    bootstrap_servers: str = ""
    schema_registry_url: str = ""
    topic_prefix: str = "pgcdc"
    slot: str = "pgcdc"
    publication: str = "pgcdc"
    tables: list[str] = field(default_factory=lambda: ["*"])
    create_slot: bool = True  # create the slot if missing
    create_publication: bool = True  # create the publication if missing / set its tables
    binary: bool = False  # pgoutput binary tuples (faster for some types)
    failover_slot: bool | None = None  # None: on where the server is 17+ and a primary
    origin: str | None = None  # PostgreSQL 16+: 'none' publishes only local changes
    topic_partitions: int = 1
    topic_replication_factor: int = 1
    topic_retention_ms: int = -1  # unlimited: topics are the replayable log
    tombstones: bool = False  # a null-value record after each delete, for compacted topics
    transaction_topic: bool = False  # BEGIN/END markers to <prefix>.transaction
    status_interval_s: float = 10.0  # standby status update period
    heartbeat_interval_s: float = 0.0  # >0: pg_logical_emit_message so idle slots advance
    spill_bytes: int = 64 * 1024 * 1024  # buffered transaction size before spilling to disk
    metrics_port: int = 0  # >0: Prometheus metrics on this port
    snapshot: str = "initial"  # initial (when the slot is new) | never | initial_only
    snapshot_workers: int = 2  # parallel snapshot readers (connections)
    snapshot_chunk_rows: int = 250_000  # rows per snapshot chunk (ctid range), about
    kafka: dict[str, Any] = field(default_factory=dict)  # librdkafka settings (TLS/SASL ...)
    schema_registry: dict[str, Any] = field(default_factory=dict)  # registry client settings

    def validate(self) -> Config:
        missing = [f"{name} (--{name.replace('_', '-')} or {env})"
                   for name, env in ENV_DEFAULTS.items() if not getattr(self, name)]
        if missing:
            raise ConfigError("missing " + ", ".join(missing))
        if not self.tables:
            raise ConfigError("no tables to publish (--tables)")
        if self.topic_partitions < 1 or self.topic_replication_factor < 1:
            raise ConfigError("topic partitions and replication factor must be >= 1")
        if self.snapshot not in SNAPSHOT_MODES:
            raise ConfigError(f"snapshot must be one of {', '.join(SNAPSHOT_MODES)}, "
                              f"not {self.snapshot!r}")
        if self.snapshot_workers < 1 or self.snapshot_chunk_rows < 1:
            raise ConfigError("snapshot workers and chunk rows must be >= 1")
        if self.origin not in (None, "none", "any"):
            raise ConfigError(f"origin must be 'none' or 'any', not {self.origin!r}")
        return self


def load(config_file: str | None, overrides: dict[str, Any],
         environ: dict[str, str] | None = None, validate: bool = True) -> Config:
    """Build the configuration; `overrides` are flags the user set (None means unset).
    `validate=False` skips the completeness checks (for commands needing only the database)."""
    environ = dict(os.environ) if environ is None else environ
    values: dict[str, Any] = {name: environ[env] for name, env in ENV_DEFAULTS.items()
                              if environ.get(env)}
    if config_file:
        values.update(_read_yaml(Path(config_file)))
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in fields(Config)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown configuration keys: {', '.join(unknown)}")
    if isinstance(values.get("tables"), str):
        values["tables"] = [t.strip() for t in values["tables"].split(",") if t.strip()]
    try:
        cfg = Config(**values)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
    return cfg.validate() if validate else cfg


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping of keys to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}
