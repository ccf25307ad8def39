"""The project's error tree. Every expected failure is one of these, with an actionable message.

    CdcError
    ├── DecodeError      malformed protocol bytes (carries LSN and byte offset)
    ├── SourceError      PostgreSQL: connection, slot, publication, replication stream
    │   └── PrivilegeError   the role lacks a grant (SQLSTATE 42501): names it and its SQL
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
    """PostgreSQL-side failure: connection, slot, publication or replication stream.

    `transient`: the connection failed or was closed under us (server restarting, network,
    walsender terminated), so `pgcdc run` retries with backoff from the slot; False (the
    default): the server refused or the setup is wrong, and retrying cannot help. Set where
    the error is raised, by whoever knows which it is."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


# SQLSTATE insufficient_privilege: "permission denied for ...", "must be owner of ...".
INSUFFICIENT_PRIVILEGE = "42501"


def is_privilege_error(exc: BaseException) -> bool:
    """Whether a psycopg error is the server refusing a privilege (never transient)."""
    return getattr(exc, "sqlstate", None) == INSUFFICIENT_PRIVILEGE


# SQLSTATEs of a name that no longer resolves: undefined_table ("relation ... does not exist")
# and undefined_object ("relation ... is not part of the publication", a type or index gone).
VANISHED = ("42P01", "42704")


def is_vanished(exc: BaseException) -> bool:
    """Whether a psycopg error says an object named in the statement does not exist (any
    more): an application dropped or renamed it since pgcdc read the catalog. Not an error
    of pgcdc's: the next look at the catalog sees what replaced it."""
    return getattr(exc, "sqlstate", None) in VANISHED


class CatalogChanged(SourceError):
    """A statement naming tables listed a moment ago met one the application dropped or renamed
    since (`is_vanished`): listing them again settles it. Transient."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


class PrivilegeError(SourceError):
    """The role lacks a privilege pgcdc needs: one line naming the grant and the SQL that
    gives it (docs/operations.md "Least privilege"). Never transient: retrying cannot grant it."""

    def __init__(self, role: str, lacks: str, fix: str, *, detail: str = "") -> None:
        self.role = role
        self.lacks = lacks
        self.fix = fix
        said = f" ({detail})" if detail else ""
        super().__init__(f'role "{role}" lacks {lacks}{said}: {fix} '
                         '(or see docs/operations.md "Least privilege")', transient=False)


# What libpq and the server say when a connection dies under a client (a server-side detail
# appended to one of our messages decides whether that failure is transient).
_CONNECTION_GONE = ("connection lost", "cannot connect", "cannot open a replication connection",
                    "stream ended", "stream failed", "terminating connection", "server closed")


def connection_gone(detail: str) -> bool:
    """Whether a server or libpq message `detail` says the connection itself failed."""
    return any(text in detail for text in _CONNECTION_GONE)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (psycopg appends DETAIL/HINT/CONTEXT lines),
    or its class name when it has none: error messages stay one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class SchemaError(CdcError):
    """An Avro schema could not be derived, registered or fetched."""


class SinkError(CdcError):
    """Kafka rejected or failed to deliver events.

    `transient`: an aborted Kafka transaction (exactly-once mode), which `pgcdc run` retries by
    streaming again from the slot; False: delivery failed for good."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ConfigError(CdcError):
    """Configuration is invalid or incomplete."""
