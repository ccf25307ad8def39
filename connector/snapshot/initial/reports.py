"""What a snapshot reader tells the coordinator, one frozen message per report (picklable: a
reader may be a spawned process).

A reader sends, in this order: `RowsRead` (progress) and `ChunkProduced` (a chunk fully
produced) as it goes; with ``--exactly-once`` `ReaderFlushed` once Kafka has all its events
(it then waits for the coordinator's go to commit); and exactly one final report
(`FINAL_REPORTS`): `ReaderDone` -- sent only once Kafka acknowledged every event --,
`ReaderStopped` or `ReaderFailed`.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.errors import CdcError, SchemaError, SinkError, SourceError

__all__ = ["FINAL_REPORTS", "ChunkProduced", "ReaderDone", "ReaderFailed", "ReaderFlushed",
           "ReaderStopped", "Report", "RowsRead"]


@dataclass(frozen=True)
class RowsRead:
    table: int  # index of the table in the plan
    rows: int


@dataclass(frozen=True)
class ChunkProduced:
    table: int
    bytes: int  # the key and value bytes the chunk produced


@dataclass(frozen=True)
class ReaderFlushed:
    """--exactly-once: every event in Kafka, waiting for the coordinator's go to commit."""


@dataclass(frozen=True)
class ReaderDone:
    rows: int


@dataclass(frozen=True)
class ReaderStopped:
    """The reader noticed the stop request (not an error: the snapshot is abandoned)."""


#: The error classes a failure keeps across the process boundary; any other is a SourceError.
_KEPT: dict[str, type[CdcError]] = {cls.__name__: cls
                                    for cls in (SourceError, SchemaError, SinkError)}


@dataclass(frozen=True)
class ReaderFailed:
    """A reader's error, as its class name and message: an exception with its own constructor
    arguments (`PrivilegeError`) does not survive pickling, so the class is rebuilt here, the
    one place that does it (`error`)."""

    kind: str
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> ReaderFailed:
        return cls(type(exc).__name__, str(exc))

    def error(self) -> CdcError:
        """The coordinator's side: the error to raise (a SourceError unless the class is one
        of SourceError, SchemaError, SinkError)."""
        return _KEPT.get(self.kind, SourceError)(self.message)


Report = RowsRead | ChunkProduced | ReaderFlushed | ReaderDone | ReaderStopped | ReaderFailed
FINAL_REPORTS = (ReaderDone, ReaderStopped, ReaderFailed)
