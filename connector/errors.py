"""The project's error tree. Every expected failure is one of these, with an actionable message.

    CdcError
    ├── DecodeError      malformed protocol bytes (carries LSN and byte offset)
    ├── SourceError      PostgreSQL: connection, slot, publication, replication stream
    ├── SchemaError      Avro schema derivation or the Schema Registry
    ├── SinkError        Kafka delivery
    └── ConfigError      invalid or missing configuration
"""

from __future__ import annotations


class CdcError(Exception):
    """Root of every error pgcdc raises on purpose."""


class DecodeError(CdcError):
    """Bytes that are not a valid pgoutput message (or frame)."""

    def __init__(self, message: str, *, offset: int | None = None, lsn: str | None = None) -> None:
        self.reason = message
        self.offset = offset
        self.lsn = lsn
        where = []
        if lsn is not None:
            where.append(f"lsn {lsn}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class SourceError(CdcError):
    """PostgreSQL-side failure: connection, slot, publication or replication stream."""


class SchemaError(CdcError):
    """An Avro schema could not be derived, registered or fetched."""


class SinkError(CdcError):
    """Kafka rejected or failed to deliver events."""


class ConfigError(CdcError):
    """Configuration is invalid or incomplete."""
