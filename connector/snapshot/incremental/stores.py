"""The driver's view of a request channel (`channel`): one interface over the signal table
(`TableRequests`) and the ``<prefix>.signal`` topic (`signal_topic.TopicRequests`), so the
driver, the re-sync after DDL and `pgcdc snapshot` queue and run requests the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from connector.names import TableName

from . import signals
from .signals import Conn, SnapshotRequest

__all__ = ["RequestStore", "TableRequests"]


class RequestStore(Protocol):
    channel: str  # "table" or "kafka"

    def available(self) -> bool:
        """Whether requests can be there at all (the table, the topic exists)."""
        ...

    def next_request(self, slot: str) -> SnapshotRequest | None: ...

    def state_of(self, request_id: int) -> str | None: ...

    def mark_running(self, request_id: int) -> None: ...

    def record_progress(self, request_id: int, table_index: int,
                        last_key: Sequence[str] | None, rows: int) -> None: ...

    def set_state(self, request_id: int, state: str, message: str | None = None) -> None: ...

    def request(self, slot: str, tables: Sequence[TableName],
                message: str | None = None) -> int: ...

    def pending_includes(self, slot: str, table: TableName) -> bool: ...


class TableRequests:
    """The signal table, on the connection `conn()` returns (reopened by its owner)."""

    channel = "table"

    def __init__(self, conn: Callable[[], Conn]) -> None:
        self._conn = conn

    def available(self) -> bool:
        return signals.table_exists(self._conn())

    def next_request(self, slot: str) -> SnapshotRequest | None:
        return signals.next_request(self._conn(), slot)

    def state_of(self, request_id: int) -> str | None:
        return signals.state_of(self._conn(), request_id)

    def mark_running(self, request_id: int) -> None:
        signals.mark_running(self._conn(), request_id)

    def record_progress(self, request_id: int, table_index: int,
                        last_key: Sequence[str] | None, rows: int) -> None:
        signals.record_progress(self._conn(), request_id, table_index, last_key, rows)

    def set_state(self, request_id: int, state: str, message: str | None = None) -> None:
        signals.set_state(self._conn(), request_id, state, message)

    def request(self, slot: str, tables: Sequence[TableName],
                message: str | None = None) -> int:
        signals.ensure_table(self._conn())
        return signals.request(self._conn(), slot, tables, message)

    def pending_includes(self, slot: str, table: TableName) -> bool:
        return signals.pending_includes(self._conn(), slot, table)
