"""Producer and topic settings: what the no-loss guarantee forces, what passes through."""

from __future__ import annotations

import pytest

from connector.config import TRUNCATE_RECORDS, Config
from connector.errors import ConfigError
from connector.sink.producer import truncate_partitions
from connector.sink.settings import PRODUCER_DEFAULTS, admin_config, producer_config
from connector.sink.topics import TopicSpec

BASE = {"bootstrap.servers": "k:9092"}


def test_forced_and_default_settings() -> None:
    config = producer_config(BASE)
    assert config["enable.idempotence"] is True
    assert config["acks"] == "all"
    for key, value in PRODUCER_DEFAULTS.items():
        assert config[key] == value


def test_pass_through_overrides_defaults() -> None:
    config = producer_config({**BASE, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                              "message.timeout.ms": 5000, "compression.type": "zstd"})
    assert config["security.protocol"] == "SASL_SSL"
    assert config["message.timeout.ms"] == 5000
    assert config["compression.type"] == "zstd"


@pytest.mark.parametrize("setting", [{"acks": "1"}, {"acks": 0}, {"request.required.acks": 1},
                                     {"enable.idempotence": False},
                                     {"enable.idempotence": "false"},
                                     {"transactional.id": "x"},
                                     {"delivery.report.only.error": True}])
def test_settings_that_break_the_guarantee_are_refused(setting: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        producer_config({**BASE, **setting})


@pytest.mark.parametrize("setting", [{"acks": "all"}, {"acks": -1}, {"acks": "-1"},
                                     {"enable.idempotence": True},
                                     {"enable.idempotence": "true"}])
def test_restating_the_forced_settings_is_fine(setting: dict[str, object]) -> None:
    assert producer_config({**BASE, **setting})["acks"] == "all"


def test_bootstrap_servers_required() -> None:
    with pytest.raises(ConfigError):
        producer_config({})


def test_topic_spec_defaults_keep_everything() -> None:
    spec = TopicSpec()
    assert spec.topic_config() == {"retention.ms": "-1", "cleanup.policy": "delete"}
    assert (spec.partitions, spec.replication_factor) == (1, 1)


def test_topic_spec_extra_configs_and_compaction() -> None:
    spec = TopicSpec(partitions=3, cleanup_policy="compact, delete",
                     configs={"min.insync.replicas": 2})
    assert spec.topic_config() == {"retention.ms": "-1", "cleanup.policy": "compact,delete",
                                   "min.insync.replicas": "2"}


@pytest.mark.parametrize("kwargs", [{"partitions": 0}, {"replication_factor": 0},
                                    {"retention_ms": -2}, {"cleanup_policy": "forever"}])
def test_topic_spec_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        TopicSpec(**kwargs)  # type: ignore[arg-type]


def test_admin_config_drops_only_delivery_callbacks() -> None:
    def on_delivery(err: object, msg: object) -> None:
        pass

    def oauth_cb(config: object) -> tuple[str, float]:
        return "token", 0.0

    config = admin_config({**BASE, "on_delivery": on_delivery, "oauth_cb": oauth_cb,
                           "acks": "all", "sasl.username": "u"})
    assert "on_delivery" not in config
    assert config["oauth_cb"] is oauth_cb
    assert config["sasl.username"] == "u"


def test_truncate_partitions_per_setting() -> None:
    assert list(truncate_partitions("every-partition", 4)) == [0, 1, 2, 3]
    assert list(truncate_partitions("one", 4)) == [0]
    assert list(truncate_partitions("none", 4)) == []
    assert all(truncate_partitions(mode, 1) is not None for mode in TRUNCATE_RECORDS)
    with pytest.raises(ValueError, match="'all'"):
        truncate_partitions("all", 4)


def test_config_refuses_an_unknown_truncate_setting() -> None:
    cfg = Config(dsn="host=h dbname=d", bootstrap_servers="k:9092",
                 schema_registry_url="http://r", truncate_records="some")
    with pytest.raises(ConfigError, match="truncate_records must be one of"):
        cfg.validate()
    assert Config().truncate_records == "every-partition"
