"""`TopicCreator.topics_with_events`: which of a prefix's topics ever held an event (the test
for "did this connector publish before"), against a stand-in AdminClient."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaException

from connector.errors import SinkError
from connector.sink.topics import TopicCreator


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class _Admin:
    def __init__(self, ends: dict[str, list[int]], *, fail: bool = False) -> None:
        self.ends = ends
        self.fail = fail
        self.asked: list[tuple[str, int]] = []

    def list_topics(self, timeout: float) -> Any:
        if self.fail:
            raise KafkaException("broker transport failure")
        return SimpleNamespace(topics={
            name: SimpleNamespace(error=None, partitions={p: None for p in range(len(ends))})
            for name, ends in self.ends.items()})

    def list_offsets(self, requests: dict[Any, Any], request_timeout: float) -> dict[Any, Any]:
        self.asked += [(tp.topic, tp.partition) for tp in requests]
        return {tp: _done(SimpleNamespace(offset=self.ends[tp.topic][tp.partition]))
                for tp in requests}


def _creator(admin: _Admin) -> TopicCreator:
    return TopicCreator({"bootstrap.servers": "k:9092"}, admin=admin)  # type: ignore[arg-type]


def test_only_topics_of_the_prefix_with_an_event_count() -> None:
    admin = _Admin({"app.public.a": [0, 3], "app.public.b": [0], "app.message": [1],
                    "apple.public.a": [9], "other.app.x": [5]})
    assert _creator(admin).topics_with_events("app") == ["app.message", "app.public.a"]
    assert {t for t, _ in admin.asked} == {"app.public.a", "app.public.b", "app.message"}


def test_no_topic_of_the_prefix_asks_no_offsets() -> None:
    admin = _Admin({"other.public.a": [4]})
    assert _creator(admin).topics_with_events("app") == []
    assert admin.asked == []


def test_kafka_unreachable_is_a_sink_error() -> None:
    with pytest.raises(SinkError, match="cannot list Kafka topics"):
        _creator(_Admin({}, fail=True)).topics_with_events("app")
