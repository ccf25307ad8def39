"""The Kafka client settings of the sink, in one place: the producer's (defaults, what the
no-loss guarantee forces, what it refuses) and an admin client's, derived from the same user
settings (`kafka:` in pgcdc.yaml, `--kafka-option`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from connector.errors import ConfigError

__all__ = ["ANY_PARTITION", "PRODUCER_DEFAULTS", "Headers", "admin_config", "producer_config"]

#: Record headers as librdkafka takes them.
Headers = list[tuple[str, str | bytes | None]]
#: librdkafka's "no partition given": the configured partitioner chooses.
ANY_PARTITION: Final = -1

#: Settings pgcdc chooses unless the user sets them.
PRODUCER_DEFAULTS: Final[Mapping[str, Any]] = {
    "message.timeout.ms": 300_000,
    "linger.ms": 5,
    "queue.buffering.max.kbytes": 65_536,
}
#: Settings the no-loss guarantee depends on; the user may repeat them but not change them.
_FORCED: Final[Mapping[str, Any]] = {"enable.idempotence": True, "acks": "all",
                                     "allow.auto.create.topics": False}
_ACKS_ALL: Final = {"all", "-1", -1}
_DELIVERY_CALLBACKS = frozenset({"on_delivery"})


def producer_config(kafka_config: Mapping[str, Any]) -> dict[str, Any]:
    """The librdkafka settings of the sink: defaults < user settings, plus the forced ones."""
    config = dict(PRODUCER_DEFAULTS)
    config.update(kafka_config)
    for key in ("acks", "request.required.acks"):
        if key in kafka_config and kafka_config[key] not in _ACKS_ALL:
            raise ConfigError(f"kafka setting {key}={kafka_config[key]!r} is not allowed: "
                              "pgcdc needs acks=all so that an acknowledged event is durable")
    idem = kafka_config.get("enable.idempotence", True)
    if str(idem).lower() not in ("true", "1"):
        raise ConfigError("kafka setting enable.idempotence=false is not allowed: pgcdc needs "
                          "the idempotent producer so retries neither duplicate nor reorder")
    if "delivery.report.only.error" in kafka_config:
        raise ConfigError("kafka setting delivery.report.only.error is not allowed: pgcdc "
                          "confirms WAL from each event's delivery report")
    if str(kafka_config.get("allow.auto.create.topics", False)).lower() in ("true", "1"):
        raise ConfigError("kafka setting allow.auto.create.topics=true is not allowed: pgcdc "
                          "creates its topics itself, and a deleted topic must not come back "
                          "empty on the next write")
    if "transactional.id" in kafka_config:
        raise ConfigError("kafka setting transactional.id is not supported by this sink "
                          "(it is the idempotent, at-least-once producer)")
    if not config.get("bootstrap.servers"):
        raise ConfigError("kafka setting bootstrap.servers is missing")
    config.pop("request.required.acks", None)
    config.update(_FORCED)
    return config


def admin_config(kafka_config: Mapping[str, Any]) -> dict[str, Any]:
    """Producer settings for an AdminClient. librdkafka's admin handle is a producer handle, so
    bootstrap/TLS/SASL keys, producer-only keys and error/oauth/log callbacks are all accepted;
    only the delivery callbacks, which the admin client rejects, are dropped. Metadata requests
    never create topics (``allow.auto.create.topics`` off, as for the producer)."""
    config = {k: v for k, v in kafka_config.items() if k not in _DELIVERY_CALLBACKS}
    config["allow.auto.create.topics"] = False
    return config
