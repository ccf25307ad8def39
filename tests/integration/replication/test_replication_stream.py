"""The replication edge against real PostgreSQL 15 and 18: admin checks, stream, feedback."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from connector.errors import ConfigError, SourceError
from connector.pgoutput import Commit, Insert, PrimaryKeepalive, Relation, XLogData
from connector.replication import (
    ReplicationAdmin,
    ReplicationStream,
    StreamOptions,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"slot_{tag}", f"pub_{tag}"


@pytest.fixture
def admin(postgres):
    admin = ReplicationAdmin.connect(postgres.dsn)
    yield admin
    admin.close()


def _read_until_commit(stream: ReplicationStream, timeout: float = 30.0) -> list:
    decoder = stream.options.decoder()
    messages = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for frame in stream.read(0.5):
            if isinstance(frame, XLogData):
                msg = decoder.decode(frame.payload)
                messages.append(msg)
                if isinstance(msg, Commit):
                    return messages
            else:
                assert isinstance(frame, PrimaryKeepalive)
    raise AssertionError(f"no commit within {timeout}s: {messages}")


def test_streams_changes_and_feedback_advances_the_slot(postgres, admin, names) -> None:
    slot, pub = names
    admin.check_wal_level()
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute('CREATE SCHEMA IF NOT EXISTS "odd-Schema"')
        conn.execute('CREATE TABLE IF NOT EXISTS "odd-Schema"."Weird Table"'
                     " (id int PRIMARY KEY, v text)")
        admin.ensure_publication(pub, ['odd-Schema.Weird*'])
        info = admin.create_slot(slot)
        admin.check_slot(info)
        proto = admin.features.protocol_version
        stream = ReplicationStream(postgres.dsn, StreamOptions(slot, pub, proto))
        try:
            conn.execute('INSERT INTO "odd-Schema"."Weird Table" VALUES (1, \'x\')')
            messages = _read_until_commit(stream)
            relation = next(m for m in messages if isinstance(m, Relation))
            assert (relation.namespace, relation.name) == ("odd-Schema", "Weird Table")
            insert = next(m for m in messages if isinstance(m, Insert))
            assert list(insert.new) == ["1", "x"]
            commit = messages[-1]
            stream.send_status(commit.end_lsn)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                confirmed = admin.slot(slot).confirmed_flush_lsn
                if confirmed is not None and confirmed >= commit.end_lsn:
                    break
                stream.read(0.2)
            assert admin.slot(slot).confirmed_flush_lsn == commit.end_lsn
        finally:
            stream.close()
            time.sleep(0.2)
            admin.drop_slot(slot)
            conn.execute(f"DROP PUBLICATION {pub}")


def test_missing_slot_is_one_clear_error(postgres, admin, names) -> None:
    slot, pub = names
    admin.ensure_publication(pub, ["*"])
    with pytest.raises(SourceError, match=f"slot '{slot}'.*does not exist"):
        ReplicationStream(postgres.dsn, StreamOptions(slot, pub, 1))
    admin.conn.execute(f"DROP PUBLICATION {pub}")


def test_slot_with_another_plugin_is_refused(postgres, admin, names) -> None:
    slot, _ = names
    admin.conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
    try:
        with pytest.raises(SourceError, match="test_decoding"):
            admin.check_slot(admin.slot(slot))
    finally:
        admin.drop_slot(slot)


def test_table_pattern_matching_nothing_is_a_config_error(admin) -> None:
    with pytest.raises(ConfigError, match="no_such_table"):
        admin.resolve_tables(["public.no_such_table"])


def test_replica_identity_warning(postgres, admin, names) -> None:
    _, pub = names
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS no_key_table (v text)")
        conn.execute("CREATE TABLE IF NOT EXISTS keyed_table (id int PRIMARY KEY)")
    admin.ensure_publication(pub, ["public.no_key_table", "public.keyed_table"])
    try:
        assert admin.warn_about_replica_identity(pub) == ["public.no_key_table"]
    finally:
        admin.conn.execute(f"DROP PUBLICATION {pub}")


def test_unreachable_server_is_a_source_error() -> None:
    with pytest.raises(SourceError, match="cannot connect"):
        ReplicationAdmin.connect("host=127.0.0.1 port=1 connect_timeout=2")
