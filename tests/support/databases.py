"""A new, empty database per test, for tests whose publication is FOR ALL TABLES or a list of
every table (`--tables '*'`): they must see only their own tables."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import make_conninfo


@contextmanager
def empty_database(dsn: str) -> Iterator[str]:
    """The DSN of a new database on the server of `dsn`, dropped afterwards."""
    name = f"pgcdc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
