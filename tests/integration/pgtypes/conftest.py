"""A database of its own on each PostgreSQL major, with the user types the tests load."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

DBNAME = "pgtypes_tests"

USER_TYPES = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'quoted "label"', 'with,comma', 'ünïcode', 'NULL');
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
CREATE DOMAIN label AS text;
CREATE DOMAIN price AS numeric(10, 2);
CREATE DOMAIN good_mood AS mood;
CREATE DOMAIN posint_list AS posint[];
CREATE DOMAIN label_of_label AS label;
CREATE TYPE pair AS (a int, b text);
"""


def _dsn(server_dsn: str, dbname: str) -> str:
    return server_dsn.replace("dbname=postgres", f"dbname={dbname}")


@pytest.fixture(scope="session")
def pgtypes_dsn(postgres) -> str:  # type: ignore[no-untyped-def]
    """DSN of a fresh database with :data:`USER_TYPES` on the current server."""
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DBNAME}")
        admin.execute(f"CREATE DATABASE {DBNAME}")
    dsn = _dsn(postgres.dsn, DBNAME)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(USER_TYPES)
    return dsn


@pytest.fixture
def conn(pgtypes_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pgtypes_dsn, autocommit=True) as connection:
        connection.execute(
            "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'"
        )
        yield connection
