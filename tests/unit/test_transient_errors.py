"""Retry or fail: `SourceError.transient`, set where the error is raised, decides whether
`pgcdc run` reconnects (the decision no longer reads the message text)."""

from __future__ import annotations

import psycopg
import pytest

from connector.errors import (
    PrivilegeError,
    SourceError,
    connection_gone,
    is_privilege_error,
    is_vanished,
)
from connector.flow import RECONNECT_BACKOFF_S, reconnect_delay
from connector.replication.privileges import connect_refusal, lacking
from connector.replication.stream import _connect_error


def test_default_is_not_transient() -> None:
    assert SourceError("publication 'p' does not exist").transient is False
    assert SourceError("x", transient=True).transient is True


@pytest.mark.parametrize("detail", ["server closed the connection unexpectedly",
                                    "FATAL: terminating connection due to administrator command",
                                    "connection lost"])
def test_connection_gone(detail: str) -> None:
    assert connection_gone(detail)


@pytest.mark.parametrize("detail", ["permission denied for database postgres",
                                    'replication slot "s" does not exist', ""])
def test_not_connection_gone(detail: str) -> None:
    assert not connection_gone(detail)


def test_connect_errors() -> None:
    refused = _connect_error(psycopg.OperationalError(
        'FATAL: password authentication failed for user "u"'))
    assert refused.transient is False
    assert str(refused).startswith("PostgreSQL refused the replication connection")
    down = _connect_error(psycopg.OperationalError(
        "connection to server at 127.0.0.1, port 1 failed: Connection refused"))
    assert down.transient is True
    assert str(down).startswith("cannot open a replication connection")


class _Refused(psycopg.errors.InsufficientPrivilege):
    """A server refusal as psycopg raises it (SQLSTATE 42501), with the server's text."""


@pytest.mark.parametrize(("detail", "lacks", "fix"), [
    ("must be owner of table t9", "ownership of table t9",
     'run as its owner: ALTER PUBLICATION "p" ADD TABLE "public"."t9"'),
    ("permission denied for table orders", "SELECT on table orders",
     "run GRANT SELECT ON TABLE orders TO cdc"),
    ("permission denied for schema sales", "USAGE on schema sales",
     "run GRANT USAGE ON SCHEMA sales TO cdc"),
    ("permission denied for database app", "CREATE on database app",
     "run GRANT CREATE ON DATABASE app TO cdc"),
    ("permission denied to use replication slots", "the REPLICATION attribute",
     "run ALTER ROLE cdc REPLICATION as a superuser"),
])
def test_a_privilege_error_names_the_grant_and_is_not_transient(
        detail: str, lacks: str, fix: str) -> None:
    exc = _Refused(detail)
    assert is_privilege_error(exc)
    error = lacking(exc, "cdc", owner_sql='ALTER PUBLICATION "p" ADD TABLE "public"."t9"')
    assert isinstance(error, PrivilegeError) and isinstance(error, SourceError)
    assert error.transient is False
    assert str(error).startswith(f'role "cdc" lacks {lacks}')
    assert fix in str(error) and 'docs/operations.md "Least privilege"' in str(error)
    assert "\n" not in str(error)


def test_only_transient_failures_are_retried_with_backoff_a_bounded_number_of_times(
        ) -> None:
    lost = SourceError("replication connection lost: x", transient=True)
    delays = [reconnect_delay(lost, attempt, stopping=False) for attempt in range(20)]
    assert delays[:len(RECONNECT_BACKOFF_S)] == list(RECONNECT_BACKOFF_S)
    assert delays[len(RECONNECT_BACKOFF_S):] == [None] * (20 - len(RECONNECT_BACKOFF_S))
    assert reconnect_delay(lost, 0, stopping=True) is None  # a stop wins over a retry
    # The text of a transient failure, without the flag: not retried; nor a refusal.
    assert reconnect_delay(SourceError("replication connection lost: but not marked"), 0,
                           stopping=False) is None
    refused = lacking(_Refused("must be owner of table t9"), "cdc")
    assert reconnect_delay(refused, 0, stopping=False) is None


def test_other_server_errors_are_not_privilege_errors() -> None:
    assert not is_privilege_error(psycopg.errors.UndefinedTable("relation x does not exist"))
    assert not is_privilege_error(ValueError("permission denied"))


def test_a_name_gone_since_it_was_listed_is_vanished() -> None:
    """A table dropped or renamed between two statements (issue 46): "dropped since", not an
    error of pgcdc's; anything else is not."""
    assert is_vanished(psycopg.errors.UndefinedTable('relation "public.x" does not exist'))
    assert is_vanished(psycopg.errors.UndefinedObject('relation "x" is not part of the '
                                                      'publication'))
    assert not is_vanished(psycopg.errors.DuplicateTable("relation x already exists"))
    assert not is_vanished(psycopg.errors.InsufficientPrivilege("permission denied"))
    assert not is_vanished(ValueError("does not exist"))


def test_refused_connections_name_the_grant() -> None:
    walsender = connect_refusal('FATAL:  permission denied to start WAL sender', "cdc")
    assert walsender is not None and "REPLICATION attribute" in str(walsender)
    connect = connect_refusal('connection failed: FATAL:  permission denied for database "app"'
                              "\nDETAIL:  User does not have CONNECT privilege.", "cdc")
    assert connect is not None
    assert str(connect).startswith('role "cdc" lacks CONNECT on database app: run GRANT CONNECT')
    assert connect_refusal("Connection refused", "cdc") is None
