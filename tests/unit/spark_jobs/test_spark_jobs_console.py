"""The merge job's one-line reasons (spark_jobs/runtime/console.py), from the texts Spark gives."""

from __future__ import annotations

import socket

import pytest

from spark_jobs.runtime.console import (
    SourceUnreachable,
    _bootstrap_addresses,
    check_kafka,
    query_failure,
)

# The first line of a StreamingQueryException when Kafka went away (seen with Spark 4.2).
KAFKA_GONE = (
    "[STREAM_FAILED] Query [id = a0be8be3, runId = a191b7a7] terminated with exception: "
    "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
    "assignment. Call: listTopics SQLSTATE: XXKST\nJVM stacktrace:\n...")


def test_query_failure_keeps_the_cause_and_says_where_kafka_was() -> None:
    assert query_failure(KAFKA_GONE, "k1:9092") == (
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
        "assignment. Call: listTopics (is Kafka reachable at k1:9092?)")


def test_query_failure_of_another_error_is_its_first_line() -> None:
    assert query_failure("boom: disk full\nmore", "k:1") == "boom: disk full"
    assert query_failure("", "k:1") == "unknown error"


@pytest.mark.parametrize("servers, expected", [
    ("a:9092", [("a", 9092)]),
    ("a:9092, b:9093", [("a", 9092), ("b", 9093)]),
    ("SASL_SSL://a:9092", [("a", 9092)]),
    ("[::1]:9092", [("::1", 9092)]),
    ("nonsense", []),
])
def test_bootstrap_addresses(servers: str, expected: list[tuple[str, int]]) -> None:
    assert _bootstrap_addresses(servers) == expected


def test_check_kafka_needs_one_listening_server() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            dead = closed.getsockname()[1]
        check_kafka(f"127.0.0.1:{dead},127.0.0.1:{port}")  # the second one answers
        with pytest.raises(SourceUnreachable, match=f"cannot connect to Kafka at 127.0.0.1:{dead}"):
            check_kafka(f"127.0.0.1:{dead}", timeout_s=2)
