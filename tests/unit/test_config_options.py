"""What a user's command line and YAML file mean, pinned whole: every `pgcdc run` flag and
YAML-only key, the environment, the precedence between them, and every `pgcdc merge` option.
Each option is declared once (connector/options.py); the parsers and YAML keys derived from the
declarations must parse a representative configuration exactly as the hand-written ones did."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from connector.cli import build_parser
from connector.tools.run import config_from_args
from spark_jobs.runtime.config import parse_args

ENV = {"PGCDC_DSN": "host=from-env", "KAFKA_BOOTSTRAP_SERVERS": "env:9092",
       "SCHEMA_REGISTRY_URL": "http://env-registry"}

# Every Config field at its default (the environment gives the three connection settings).
RUN_DEFAULTS: dict[str, Any] = {
    "dsn": "host=from-env", "bootstrap_servers": "env:9092",
    "schema_registry_url": "http://env-registry", "topic_prefix": "pgcdc", "slot": "pgcdc",
    "publication": "pgcdc", "tables": ["*"], "create_slot": True, "create_publication": True,
    "keyless_tables": "refuse", "all_tables_publication": False, "table_trigger": False,
    "table_settings": {}, "mask_salt": "", "mask_hash_encoding": "hex",
    "publish_generated_columns": False, "publish_via_partition_root": None,
    "detach_deletes": False, "binary": False, "failover_slot": None, "origin": None,
    "topic_partitions": 1, "topic_replication_factor": 1, "topic_retention_ms": -1,
    "tombstones": False, "truncate_records": "every-partition", "value_format": "pgcdc",
    "transaction_topic": False, "status_interval_s": 10.0, "heartbeat_interval_s": 10.0,
    "heartbeat_dsn": "", "spill_bytes": 64 * 1024 * 1024, "schema_check_interval_s": 5.0,
    "wal_warn_bytes": 1 << 30, "metrics_port": 0, "metrics_host": "0.0.0.0",
    "snapshot": "initial", "snapshot_workers": 2, "snapshot_chunk_rows": 250_000,
    "incremental_chunk_rows": 10_000, "resync_on_ddl": True, "signal_channel": "auto",
    "exactly_once": False, "exactly_once_batch_transactions": 1000,
    "exactly_once_batch_bytes": 16 * 1024 * 1024, "exactly_once_batch_ms": 100,
    "oversized_events": "fail", "max_event_bytes": 0, "kafka_timeout_s": 30.0,
    "schema_registry_attempts": 5, "kafka": {}, "schema_registry": {},
}

YAML = """\
slot: from_yaml              # a flag below overrides it
topic-partitions: 2          # ... and this (`-` or `_` alike)
create_slot: false
create-publication: true
table_settings:
  public.orders: {mask: {email: hash}}
mask_salt: "env:SALT"
mask_hash_encoding: base64
publish_generated_columns: true
topic_retention_ms: 86400000
status_interval_s: 5
spill_bytes: 1048576
kafka: {linger.ms: 5, compression.type: gzip}
schema_registry: {basic.auth.user.info: "env:REGISTRY_AUTH"}
"""

EVERY_FLAG = [
    "--dsn", "host=db dbname=shop", "--bootstrap-servers", "k1:9092,k2:9092",
    "--schema-registry-url", "http://registry", "--topic-prefix", "shop", "--slot", "s1",
    "--publication", "p1", "--tables", "public.*, billing.invoices", "--keyless-tables", "full",
    "--table-trigger", "--publish-via-partition-root", "--detach-deletes",
    "--oversized-events", "omit", "--max-event-bytes", "500000", "--binary",
    "--no-failover-slot", "--origin", "none", "--topic-partitions", "6",
    "--topic-replication-factor", "3", "--tombstones", "--truncate-records", "one",
    "--value-format", "debezium", "--transaction-topic", "--heartbeat-interval-s", "2.5",
    "--heartbeat-dsn", "host=primary", "--snapshot", "never", "--snapshot-workers", "4",
    "--snapshot-chunk-rows", "1000", "--incremental-chunk-rows", "500", "--no-resync-on-ddl",
    "--signal-channel", "kafka", "--exactly-once", "--exactly-once-batch-transactions", "10",
    "--exactly-once-batch-bytes", "2048", "--exactly-once-batch-ms", "50",
    "--metrics-port", "9100", "--metrics-host", "127.0.0.1", "--schema-check-interval-s", "1.5",
    "--wal-warn-bytes", "4096", "--kafka-timeout-s", "12", "--schema-registry-attempts", "3",
    "--kafka", "compression.type=zstd", "--kafka", "sasl.password=env:KAFKA_PASSWORD",
    "--log-level", "DEBUG",
]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**ENV, "SALT": "pepper", "REGISTRY_AUTH": "u:p",
                        "KAFKA_PASSWORD": "secret"}.items():
        monkeypatch.setenv(name, value)


def test_every_run_flag_over_a_yaml_file_over_the_environment(tmp_path: Path, env: None
                                                              ) -> None:
    config = tmp_path / "pgcdc.yaml"
    config.write_text(YAML)
    args = build_parser().parse_args(["run", "--config", str(config), *EVERY_FLAG])
    assert args.log_level == "DEBUG"
    assert asdict(config_from_args(args)) == {
        **RUN_DEFAULTS,
        "dsn": "host=db dbname=shop", "bootstrap_servers": "k1:9092,k2:9092",
        "schema_registry_url": "http://registry", "topic_prefix": "shop", "slot": "s1",
        "publication": "p1", "tables": ["public.*", "billing.invoices"], "create_slot": False,
        "keyless_tables": "full", "table_trigger": True,
        "table_settings": {"public.orders": {"mask": {"email": "hash"}}},
        "mask_salt": "pepper", "mask_hash_encoding": "base64",
        "publish_generated_columns": True, "publish_via_partition_root": True,
        "detach_deletes": True, "oversized_events": "omit", "max_event_bytes": 500_000,
        "binary": True, "failover_slot": False, "origin": "none", "topic_partitions": 6,
        "topic_replication_factor": 3, "topic_retention_ms": 86_400_000, "tombstones": True,
        "truncate_records": "one", "value_format": "debezium", "transaction_topic": True,
        "status_interval_s": 5, "heartbeat_interval_s": 2.5, "heartbeat_dsn": "host=primary",
        "spill_bytes": 1_048_576, "snapshot": "never", "snapshot_workers": 4,
        "snapshot_chunk_rows": 1000, "incremental_chunk_rows": 500, "resync_on_ddl": False,
        "signal_channel": "kafka", "exactly_once": True, "exactly_once_batch_transactions": 10,
        "exactly_once_batch_bytes": 2048, "exactly_once_batch_ms": 50, "metrics_port": 9100,
        "metrics_host": "127.0.0.1", "schema_check_interval_s": 1.5, "wal_warn_bytes": 4096,
        "kafka_timeout_s": 12.0, "schema_registry_attempts": 3,
        "kafka": {"linger.ms": 5, "compression.type": "zstd", "sasl.password": "secret"},
        "schema_registry": {"basic.auth.user.info": "u:p"},
    }


def test_run_defaults_and_the_other_switches(env: None) -> None:
    args = build_parser().parse_args(["run"])
    assert args.log_level == "INFO" and args.config is None
    assert asdict(config_from_args(args)) == RUN_DEFAULTS
    args = build_parser().parse_args([
        "run", "--tables", "*", "--all-tables-publication", "--failover-slot",
        "--no-publish-via-partition-root", "--no-table-trigger", "--no-detach-deletes",
        "--resync-on-ddl", "--value-format", "debezium"])
    assert asdict(config_from_args(args)) == {
        **RUN_DEFAULTS, "all_tables_publication": True, "failover_slot": True,
        "publish_via_partition_root": False, "truncate_records": "none",
        "value_format": "debezium"}


@pytest.mark.parametrize("flags", [
    ["--snapshot", "sometimes"], ["--topic-partitions", "six"], ["--origin", "all"],
    ["--kafka", "no-equals-sign"], ["--heartbeat-interval-s", "soon"], ["--binary", "yes"],
])
def test_a_malformed_run_flag_is_a_usage_error(flags: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["run", *flags])
    assert exc.value.code == 2


MERGE_DEFAULTS: dict[str, Any] = {
    "bootstrap_servers": "env:9092", "schema_registry_url": "http://env-registry",
    "target": "/lake", "topic_prefix": "p", "topics": (), "checkpoint": None,
    "format": "delta", "trigger": "10s", "replay": False, "max_offsets_per_trigger": None,
    "dead_letter": None, "partition_by": (), "kafka_options": {}, "parallel_tables": 0,
    "io_tables": 0, "metrics_port": 0, "metrics_host": "0.0.0.0", "table_properties": {},
    "column_mapping": False, "database": None, "fast_merge": "auto",
    "fast_merge_max_events": 100_000, "maintenance_every": 20, "consistent_cuts": False,
    "history": (), "history_columns": (), "history_except_columns": (),
}


def _merge(argv: list[str]) -> dict[str, Any]:
    config = parse_args(argv, prog="pgcdc merge")
    return {name: getattr(config, name) for name in MERGE_DEFAULTS}


def test_merge_defaults_from_the_environment(env: None) -> None:
    assert _merge(["--topic-prefix", "p", "--target", "/lake"]) == MERGE_DEFAULTS


def test_every_merge_option(env: None) -> None:
    assert _merge([
        "--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r",
        "--topics", "shop.public.a, shop.public.b", "--target", "/lake",
        "--checkpoint", "/ck", "--format", "delta", "--trigger", "1m",
        "--max-offsets-per-trigger", "500", "--dead-letter", "/dl",
        "--partition-by", "region,day", "--parallel-tables", "3", "--io-tables", "8",
        "--metrics-port", "9200", "--metrics-host", "127.0.0.1",
        "--kafka-option", "kafka.security.protocol=SSL", "--kafka-option", "kafka.x = y",
        "--table-property", "delta.appendOnly=false", "--change-data-feed",
        "--column-mapping", "--database", "shop", "--fast-merge", "off",
        "--fast-merge-max-events", "1000", "--maintenance-every", "0",
        "--history", "public.*", "--history-except-columns", "updated_at, seen",
    ]) == {
        **MERGE_DEFAULTS, "bootstrap_servers": "k:9092", "schema_registry_url": "http://r",
        "topic_prefix": None, "topics": ("shop.public.a", "shop.public.b"),
        "checkpoint": "/ck", "trigger": "1m", "max_offsets_per_trigger": 500,
        "dead_letter": "/dl", "partition_by": ("region", "day"), "parallel_tables": 3,
        "io_tables": 8, "metrics_port": 9200, "metrics_host": "127.0.0.1",
        "kafka_options": {"kafka.security.protocol": "SSL", "kafka.x": " y"},
        "table_properties": {"delta.appendOnly": "false", "delta.enableChangeDataFeed": "true"},
        "column_mapping": True, "database": "shop", "fast_merge": "off",
        "fast_merge_max_events": 1000, "maintenance_every": 0, "history": ("public.*",),
        "history_except_columns": ("updated_at", "seen"),
    }
    assert _merge(["--topic-prefix", "p", "--target", "/lake", "--replay", "--format",
                   "parquet"])["replay"] is True
    cuts = _merge(["--topic-prefix", "p", "--target", "/lake", "--consistent-cuts",
                   "--history", "*", "--history-columns", "a"])
    assert (cuts["consistent_cuts"], cuts["history_columns"]) == (True, ("a",))


@pytest.mark.parametrize("argv", [
    ["--target", "/lake"],  # neither --topic-prefix nor --topics
    ["--topic-prefix", "p", "--topics", "p.s.t", "--target", "/lake"],
    ["--topic-prefix", "p"],  # no --target
    ["--topic-prefix", "p", "--target", "/lake", "--format", "csv"],
    ["--topic-prefix", "p", "--target", "/lake", "--fast-merge", "on"],
    ["--topic-prefix", "p", "--target", "/lake", "--history", "*", "--history-columns", "a",
     "--history-except-columns", "b"],
])
def test_a_malformed_merge_command_is_a_usage_error(argv: list[str], env: None) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv, prog="pgcdc merge")
    assert exc.value.code == 2


def test_merge_needs_kafka_and_the_registry_without_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit):
        parse_args(["--topic-prefix", "p", "--target", "/lake"])
    assert _merge(["--bootstrap-servers", "k", "--schema-registry-url", "r",
                   "--topic-prefix", "p", "--target", "/lake"])["bootstrap_servers"] == "k"


def test_every_setting_is_declared_with_its_meaning() -> None:
    """A field without its option would have no flag and no line in the reference."""
    from dataclasses import fields

    from connector.config import Config
    from connector.options import option_of
    from spark_jobs.runtime.config import MergeConfig

    for cls in (Config, MergeConfig):
        for f in fields(cls):
            declared = option_of(f)
            assert declared is not None and declared.help, f"{cls.__name__}.{f.name}"


@pytest.mark.parametrize("argv, expected", [
    (["status", "--dsn", "host=db", "--slot", "s1", "--wal-warn-bytes", "4096",
      "--bootstrap-servers", "k:9092"],
     {"dsn": "host=db", "slot": "s1", "publication": None, "wal_warn_bytes": 4096,
      "bootstrap_servers": "k:9092", "topic_prefix": None}),
    (["snapshot", "--tables", "public.a", "--publication", "p1", "--signal-channel", "kafka",
      "--topic-prefix", "shop"],
     {"dsn": None, "slot": None, "publication": "p1", "signal_channel": "kafka",
      "bootstrap_servers": None, "topic_prefix": "shop"}),
    (["verify", "--target", "/lake", "--dsn", "host=db"], {"dsn": "host=db"}),
])
def test_the_commands_reading_a_few_run_settings(argv: list[str],
                                                 expected: dict[str, Any]) -> None:
    """`pgcdc status`, `snapshot` and `verify` take a few of `pgcdc run`'s settings as flags
    (None: not given, the YAML file's or the default applies)."""
    from connector.config import Config
    from connector.options import parsed

    assert parsed(build_parser().parse_args(argv), Config, list(expected)) == expected
