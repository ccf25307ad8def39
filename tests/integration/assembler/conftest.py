"""Fixtures of the assembler integration tests: a throwaway schema with a publication on the
real PostgreSQL 15 and 18 servers of tests/conftest.py, for each streaming configuration."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from tests.support.assembler_pg import (
    STREAM_CONFIGS,
    TWO_PHASE_CONFIGS,
    Db,
    StreamConfig,
    drop_everything,
)


def _db(request: pytest.FixtureRequest, config: StreamConfig) -> Iterator[Db]:
    server = request.getfixturevalue(config.server)
    schema = f"asm{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(schema)))
        db = Db(server.dsn, schema, config, conn)
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLES IN SCHEMA {}").format(
            sql.Identifier(db.publication), sql.Identifier(schema)))
        try:
            yield db
        finally:
            for other in db.others:
                other.close()
            drop_everything(conn, db)


@pytest.fixture(params=STREAM_CONFIGS, ids=lambda c: c.id)
def db(request: pytest.FixtureRequest) -> Iterator[Db]:
    """Each server with each protocol version / streaming mode that can stream."""
    yield from _db(request, request.param)


@pytest.fixture(params=TWO_PHASE_CONFIGS, ids=lambda c: c.id)
def db2pc(request: pytest.FixtureRequest) -> Iterator[Db]:
    """Configurations with two-phase messages (protocol >= 3)."""
    yield from _db(request, request.param)
