"""Where incremental snapshot requests travel, and how a chunk is bracketed (pure decisions).

Two request channels reach the driver's one queue:

* ``table``: the signal table ``public.pgcdc_signal`` (`signals`): a row per request, its
  progress updated in place. It is a write on the source: a standby cannot take it, nor a
  role without INSERT on it (or CREATE on its schema, to make it).
* ``kafka``: the compacted topic ``<prefix>.signal`` (`signal_topic`), as Debezium's Kafka
  signal channel: nothing is written to PostgreSQL. Each record is the *whole* state of one
  request (`RequestState`), keyed by its id; `pgcdc snapshot` appends it ``pending``, the
  producer appends it again at each change (running, a chunk acknowledged, done, failed). The
  topic is the request's store, so a request runs once and survives restarts without a
  consumer group: the producer reads the topic from its start to its end before it picks a
  request (`RequestLog.fold`: the last record of an id wins), resumes a ``running`` one at its
  last acknowledged chunk and never starts a ``done`` one again. Compaction keeps exactly the
  last record of each id, which is the state. Committed consumer offsets would say only "read
  up to here", not "run up to this chunk", and a crash between a commit and the end of a
  snapshot would lose or repeat the request; a position the producer stored in PostgreSQL
  would be a write.

`choose_channel` picks the channel of `pgcdc snapshot` (and of a re-sync after DDL),
`consumed_channels` the ones `pgcdc run` reads, `read_only_chunks` how a request's chunks are
bracketed: without writes (`readonly`: pg_current_snapshot() and a WAL horizon) when the
server is a standby or the request came over Kafka (its sender asked for no write: the role
may have no write grant at all), with the DBLog watermark messages (`window`) otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace

from connector.config import SIGNAL_CHANNELS as CHANNELS
from connector.errors import ConfigError

__all__ = ["CHANNELS", "RequestLog", "RequestState", "choose_channel", "consumed_channels",
           "read_only_chunks", "signal_topic_name"]

UNFINISHED = ("pending", "running")


def signal_topic_name(prefix: str) -> str:
    """One dot component after the prefix: the merge job's table pattern does not match it."""
    return f"{prefix}.signal"


def choose_channel(asked: str, *, standby: bool, can_write_table: bool) -> str:
    """The channel `pgcdc snapshot` writes a request to. ``auto``: the signal table on a
    primary where the role can write it (it exists and is granted, or the role may create
    it), Kafka otherwise (a standby, a role with SELECT only). ``table`` on a standby is
    refused in one line: the request would be a write."""
    if asked not in CHANNELS:
        raise ConfigError(f"signal_channel must be one of {', '.join(CHANNELS)}, not {asked!r}")
    if asked == "table" and standby:
        raise ConfigError("this server is a standby, which cannot record a snapshot request in "
                          "the signal table (a write): use --signal-channel kafka (the "
                          "default on a standby)")
    if asked != "auto":
        return asked
    return "table" if not standby and can_write_table else "kafka"


def consumed_channels(setting: str, *, standby: bool) -> tuple[bool, bool]:
    """(table, kafka): the channels `pgcdc run` takes requests from. The signal table on every
    primary (a request's progress is written back to it; the table watcher queues the
    snapshot of a new table there, in one transaction with adding it to the publication);
    never on a standby. ``<prefix>.signal`` unless the setting is ``table``."""
    if setting not in CHANNELS:
        raise ConfigError(f"signal_channel must be one of {', '.join(CHANNELS)}, not "
                          f"{setting!r}")
    return (not standby, setting != "table")


def read_only_chunks(*, standby: bool, channel: str) -> bool:
    """Whether a request's chunks are bracketed without writes (module docstring)."""
    return standby or channel == "kafka"


@dataclass(frozen=True)
class RequestState:
    """One request as a ``<prefix>.signal`` record holds it: its whole state."""

    id: int
    slot: str
    tables: tuple[str, ...]  # ``schema.table`` texts, as the signal table stores them
    state: str = "pending"
    table_index: int = 0
    last_key: tuple[str, ...] | None = None
    chunks: int = 0
    rows: int = 0
    message: str | None = None
    requested_ms: int = 0  # when `pgcdc snapshot` sent it: the queue's order

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> RequestState | None:
        """The record's state; None for a record that is not one (skipped, never fatal: the
        topic is open to anyone who may write it)."""
        try:
            d = json.loads(value)
            return cls(int(d["id"]), str(d["slot"]), tuple(str(t) for t in d["tables"]),
                       str(d.get("state", "pending")), int(d.get("table_index", 0)),
                       None if d.get("last_key") is None
                       else tuple(str(k) for k in d["last_key"]),
                       int(d.get("chunks", 0)), int(d.get("rows", 0)), d.get("message"),
                       int(d.get("requested_ms", 0)))
        except (ValueError, KeyError, TypeError):
            return None

    def progressed(self, table_index: int, last_key: Sequence[str] | None,
                   rows: int) -> RequestState:
        """A chunk acknowledged; a cancelled or finished request is left as it is (as the
        signal table's update, so a cancel is not undone)."""
        if self.state not in UNFINISHED:
            return self
        return replace(self, state="running", table_index=table_index,
                       last_key=None if last_key is None else tuple(last_key),
                       chunks=self.chunks + 1, rows=self.rows + rows)


class RequestLog:
    """The requests the signal topic holds, folded from its records in offset order. A state
    applied with its offset is replaced only by a record at a later offset: a read that ran
    in another thread (`SignalTopic.start_read`) and is folded after the producer appended a
    newer state cannot bring an older one back."""

    def __init__(self) -> None:
        self._states: dict[int, RequestState] = {}
        self._offsets: dict[int, int] = {}  # id -> offset of its state, when known

    def apply(self, state: RequestState, offset: int | None = None) -> None:
        if offset is not None:
            if offset < self._offsets.get(state.id, -1):
                return
            self._offsets[state.id] = offset
        self._states[state.id] = state

    def fold(self, values: Iterable[bytes | None]) -> None:
        for value in values:
            state = None if value is None else RequestState.decode(value)
            if state is not None:
                self.apply(state)

    def fold_records(self, records: Iterable[tuple[int, bytes | None]]) -> None:
        """(offset, value) records, as read from the topic."""
        for offset, value in records:
            state = None if value is None else RequestState.decode(value)
            if state is not None:
                self.apply(state, offset)

    def get(self, request_id: int) -> RequestState | None:
        return self._states.get(request_id)

    def of_slot(self, slot: str) -> list[RequestState]:
        """Every request of `slot`, oldest first."""
        return sorted((s for s in self._states.values() if s.slot == slot),
                      key=lambda s: (s.requested_ms, s.id))

    def next_request(self, slot: str) -> RequestState | None:
        """The oldest unfinished request of `slot`: a running one first (resumed)."""
        found = [s for s in self.of_slot(slot) if s.state in UNFINISHED]
        running = [s for s in found if s.state == "running"]
        return (running or found)[0] if found else None

    def pending_includes(self, slot: str, table: str) -> bool:
        return any(s.state == "pending" and table in s.tables for s in self.of_slot(slot))
