"""Issue 24, the pure part: `topic_problem` (what a missing or re-partitioned topic pgcdc
created means, as one actionable line), the producer never auto-creating topics, and the
`TopicCreator` refusing a recorded topic instead of creating it again (stand-in admin and
ledger; the real round trip is tests/integration/producer/test_producer_deleted.py)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from connector.errors import ConfigError, SinkError
from connector.flow import reconnect_delay
from connector.sink.settings import admin_config, producer_config
from connector.sink.topics import (
    TopicCreator,
    TopicSpec,
    create_failure_transient,
    listed_partitions,
    topic_problem,
)

BASE = {"bootstrap.servers": "k:9092"}


def test_a_topic_pgcdc_did_not_create_is_never_a_problem() -> None:
    assert topic_problem("app.public.t", None, None) is None
    assert topic_problem("app.public.t", None, 7) is None


def test_a_recorded_topic_as_created_is_fine() -> None:
    assert topic_problem("app.public.t", 3, 3) is None


def test_a_deleted_topic_says_what_to_do() -> None:
    line = topic_problem("app.public.t", 3, None)
    assert line is not None and "\n" not in line
    assert line.startswith("topic app.public.t was deleted after pgcdc created it with 3 "
                           "partitions")
    assert "--create --topic app.public.t --partitions 3" in line
    assert "re-snapshot" in line and "pgcdc snapshot --tables" in line


def test_a_recreated_topic_with_other_partitions_says_what_to_do() -> None:
    line = topic_problem("app.public.t", 3, 1)
    assert line is not None and "\n" not in line
    assert line.startswith("topic app.public.t has 1 partitions but pgcdc created it with 3")
    assert "--partitions 3" in line


def test_producer_and_admin_never_auto_create_topics() -> None:
    assert producer_config(BASE)["allow.auto.create.topics"] is False
    assert admin_config({**BASE, "allow.auto.create.topics": True})[
        "allow.auto.create.topics"] is False
    assert producer_config({**BASE, "allow.auto.create.topics": "false"})[
        "allow.auto.create.topics"] is False


@pytest.mark.parametrize("value", [True, "true", "1"])
def test_auto_create_cannot_be_turned_on(value: object) -> None:
    with pytest.raises(ConfigError, match="allow.auto.create.topics"):
        producer_config({**BASE, "allow.auto.create.topics": value})


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


class _Admin:
    """Topics → partitions; create_topics adds them."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        self.created: list[str] = []

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={
            name: SimpleNamespace(error=None, partitions=dict.fromkeys(range(n)))
            for name, n in self.topics.items()})

    def create_topics(self, new: list[Any], **kwargs: Any) -> dict[str, Future[Any]]:
        for topic in new:
            self.topics[topic.topic] = topic.num_partitions
            self.created.append(topic.topic)
        return {topic.topic: _done(None) for topic in new}


class _Ledger:
    def __init__(self, records: dict[str, int]) -> None:
        self._records = dict(records)
        self.written: list[tuple[str, int]] = []

    def records(self) -> dict[str, int]:
        return self._records

    def record(self, topic: str, partitions: int) -> None:
        self.written.append((topic, partitions))
        self._records[topic] = partitions


def _creator(admin: _Admin, ledger: _Ledger) -> TopicCreator:
    return TopicCreator(BASE, TopicSpec(partitions=3), admin=admin,  # type: ignore[arg-type]
                        ledger=ledger)  # type: ignore[arg-type]


def test_a_new_topic_is_created_and_recorded_before_use() -> None:
    admin, ledger = _Admin({}), _Ledger({})
    assert _creator(admin, ledger).ensure(["app.public.t"]) == ["app.public.t"]
    assert ledger.written == [("app.public.t", 3)]


def test_an_existing_topic_is_recorded_with_its_own_partitions() -> None:
    admin, ledger = _Admin({"app.public.t": 5}), _Ledger({})
    assert _creator(admin, ledger).ensure(["app.public.t"]) == []
    assert ledger.written == [("app.public.t", 5)]
    assert admin.created == []


def test_a_recorded_topic_is_not_recorded_again() -> None:
    admin, ledger = _Admin({"app.public.t": 3}), _Ledger({"app.public.t": 3})
    _creator(admin, ledger).ensure(["app.public.t"])
    assert ledger.written == []


def test_a_recorded_topic_that_is_gone_is_refused_not_created() -> None:
    admin, ledger = _Admin({}), _Ledger({"app.public.t": 3})
    with pytest.raises(SinkError, match="was deleted after pgcdc created it with 3"):
        _creator(admin, ledger).ensure(["app.public.t"])
    assert admin.created == []


def test_a_recorded_topic_with_other_partitions_is_refused() -> None:
    admin, ledger = _Admin({"app.public.t": 1}), _Ledger({"app.public.t": 3})
    with pytest.raises(SinkError, match="has 1 partitions but pgcdc created it with 3"):
        _creator(admin, ledger).ensure(["app.public.t"])


class _LaggingMetadata:
    """A producer whose metadata shows a new topic only from the `lag`-th request on, as a
    broker's metadata cache does for a moment after CreateTopics answered."""

    def __init__(self, topic: str, partitions: int, lag: int) -> None:
        self.topic, self.partitions, self.lag = topic, partitions, lag
        self.requests = 0

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        self.requests += 1
        known = self.requests > self.lag
        info = SimpleNamespace(error=None, partitions=dict.fromkeys(range(self.partitions)))
        return SimpleNamespace(topics={self.topic: info} if known else {})


def test_a_topic_created_a_moment_ago_is_not_taken_for_a_deleted_one() -> None:
    from connector.sink.acks import AckTracker
    from connector.sink.producer import KafkaSink

    topic = "app.public.t"
    creator = _creator(_Admin({}), _Ledger({}))
    sink = KafkaSink(BASE, AckTracker(), topics=creator, metadata_timeout_s=5)
    lagging = _LaggingMetadata(topic, 3, lag=3)
    sink._producer = lagging  # type: ignore[assignment]
    sink._prepare(topic)  # created and recorded now; used once the metadata shows it
    assert lagging.requests == 4
    sink.check_topics()  # due at once: must not read the lag as a deletion
    lagging.lag = 10**6  # now it is really gone
    with pytest.raises(SinkError, match=f"topic {topic} was deleted"):
        sink.check_topics()


def _listed(error_code: int | None, partitions: int = 3) -> Any:
    error = None if error_code is None else SimpleNamespace(code=lambda: error_code)
    parts = dict.fromkeys(range(partitions)) if error is None else {}
    return SimpleNamespace(topics={"app.public.t": SimpleNamespace(error=error, partitions=parts)})


def test_only_unknown_topic_means_gone_other_errors_mean_not_ready() -> None:
    assert listed_partitions(_listed(None), "app.public.t") == 3
    assert listed_partitions(_listed(None), "app.public.other") is None
    assert listed_partitions(_listed(KafkaError.UNKNOWN_TOPIC_OR_PART), "app.public.t") is None
    # a broker still starting lists the topic with a leader-election error: not a deletion
    assert listed_partitions(_listed(KafkaError.LEADER_NOT_AVAILABLE), "app.public.t") == 0


class _StartingBroker(_Admin):
    """Lists a topic with LEADER_NOT_AVAILABLE until it is asked for it by name."""

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        if topic is None:
            return _listed(KafkaError.LEADER_NOT_AVAILABLE)
        return _listed(None, self.topics[topic])


def test_a_recorded_topic_without_a_leader_yet_is_waited_for_not_refused() -> None:
    admin, ledger = _StartingBroker({"app.public.t": 3}), _Ledger({"app.public.t": 3})
    assert _creator(admin, ledger).ensure(["app.public.t"]) == []
    assert admin.created == [] and ledger.written == []


def test_the_periodic_check_skips_a_topic_without_a_leader_yet() -> None:
    from connector.sink.acks import AckTracker
    from connector.sink.producer import KafkaSink

    sink = KafkaSink(BASE, AckTracker(), metadata_timeout_s=5)
    sink._expected["app.public.t"] = 3
    sink._producer = SimpleNamespace(  # type: ignore[assignment]
        list_topics=lambda *a, **k: _listed(KafkaError.LEADER_NOT_AVAILABLE))
    sink.check_topics()  # no proof of a deletion: checked again next time
    sink._producer = SimpleNamespace(  # type: ignore[assignment]
        list_topics=lambda *a, **k: _listed(KafkaError.UNKNOWN_TOPIC_OR_PART))
    with pytest.raises(SinkError, match="topic app.public.t was deleted"):
        sink.check_topics()


class _RefusingAdmin(_Admin):
    """A cluster that answers every CreateTopics with `error`."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__({})
        self.error = error

    def create_topics(self, new: list[Any], **kwargs: Any) -> dict[str, Future[Any]]:
        answers: dict[str, Future[Any]] = {}
        for topic in new:
            answers[topic.topic] = Future()
            answers[topic.topic].set_exception(KafkaException(self.error))
        return answers


FENCED = KafkaError(KafkaError.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition "
                    "1 time(s): All brokers are currently fenced, or have all their log "
                    "directories cordoned.")
TOO_FEW_BROKERS = KafkaError(KafkaError.INVALID_REPLICATION_FACTOR,
                             "Unable to replicate the partition 3 time(s): The target "
                             "replication factor of 3 cannot be reached because only 1 "
                             "broker(s) are registered.")


@pytest.mark.parametrize("error, transient", [
    (FENCED, True),  # a KRaft broker that has just restarted
    (KafkaError(KafkaError.NOT_CONTROLLER, "moved"), True),
    (KafkaError(KafkaError._TRANSPORT, "connection refused"), True),
    (KafkaError(KafkaError.REQUEST_TIMED_OUT, "late", retriable=True), True),
    (None, True),  # no answer in time
    (TOO_FEW_BROKERS, False),  # the operator must lower --replication-factor
    (KafkaError(KafkaError.INVALID_CONFIG, "retention.ms"), False),
    (KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"), False),
])
def test_which_failed_topic_creations_are_worth_retrying(error: KafkaError | None,
                                                         transient: bool) -> None:
    assert create_failure_transient(error) is transient


def test_a_broker_restarting_when_a_topic_is_due_is_retried_not_fatal() -> None:
    """CI, acceptance faults: Kafka restarted, the first heartbeat's topic was due while the
    broker was still fenced, and `pgcdc run` stopped. Transient: the run loop streams again
    from the slot after a backoff (`flow.reconnect_delay`)."""
    creator = TopicCreator(BASE, TopicSpec(), admin=_RefusingAdmin(FENCED))  # type: ignore[arg-type]
    with pytest.raises(SinkError, match="fenced") as raised:
        creator.ensure(["app.heartbeat"])
    assert raised.value.transient
    assert reconnect_delay(raised.value, 0, stopping=False) is not None
    assert not creator.known("app.heartbeat")  # tried again next time


def test_a_replication_factor_the_cluster_cannot_give_stops_at_once() -> None:
    creator = TopicCreator(BASE, TopicSpec(), admin=_RefusingAdmin(TOO_FEW_BROKERS))  # type: ignore[arg-type]
    with pytest.raises(SinkError, match="only 1 broker") as raised:
        creator.ensure(["app.public.t"])
    assert not raised.value.transient
