"""The remedy `pgcdc run` adds to a record Kafka refused for its size (connector/pipeline.py):
librdkafka's messages of the producer's limit and of the broker's."""

from __future__ import annotations

import pytest

from connector.pipeline import oversized_remedy


@pytest.mark.parametrize("message", [
    "cannot produce to p.public.t: Broker: Message size too large (record of 300123 bytes, "
    "transaction ending at LSN 0/1A2B3C4)",
    "Kafka did not accept an event for p.public.t[0]: KafkaError{code=MSG_SIZE_TOO_LARGE,"
    "val=10,str=\"Broker: Message size too large\"}",
    "Kafka did not accept an event for p.public.t[0]: Broker: Message batch larger than "
    "configured server segment size",
])
def test_size_refusals_name_the_limits_to_raise(message: str) -> None:
    remedy = oversized_remedy(message)
    assert remedy is not None
    assert "max.message.bytes" in remedy and "--kafka message.max.bytes=N" in remedy


def test_other_failures_get_none() -> None:
    assert oversized_remedy("Kafka producer failed fatally: Broker: Producer fenced") is None
    assert oversized_remedy("5 events still undelivered after 30 s; their transactions are "
                            "not confirmed to PostgreSQL") is None
