"""The Kafka transaction a snapshot producer writes into, or none.

With ``--exactly-once`` every snapshot producer (the coordinator and each reader) writes into
one `SnapshotTransaction` (connector/sink/transactional.py); without it, into `NoTransaction`,
whose every call does nothing. Both have the same four calls, so the coordinator and the
readers call them unconditionally.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from connector.sink.transactional import SnapshotTransaction

__all__ = ["NoTransaction", "ProducerTransaction", "producer_transaction"]


class ProducerTransaction(Protocol):
    """What a snapshot producer calls on its transaction (`SnapshotTransaction`'s calls)."""

    def begin(self) -> None: ...

    def commit(self) -> None: ...

    def commit_if_old(self) -> bool: ...

    def abort(self) -> None: ...


class NoTransaction:
    """At-least-once: no Kafka transaction; nothing to begin, commit or abort."""

    def begin(self) -> None:
        pass

    def commit(self) -> None:
        pass

    def commit_if_old(self) -> bool:
        return False

    def abort(self) -> None:
        pass


def producer_transaction(producer: Any, kafka_settings: Mapping[str, Any], *,
                         exactly_once: bool) -> ProducerTransaction:
    """The transaction of a snapshot producer: a Kafka one with ``--exactly-once``."""
    if exactly_once:
        return SnapshotTransaction(producer, kafka_settings)
    return NoTransaction()
