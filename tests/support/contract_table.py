"""A table with a column of every contract type (schemas/README.md) and rows of edge values:
what the producer's type tests and its C/Python parity test publish."""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import psycopg

from tests.support.cdc_checks import execute


def _text(column: str) -> str:
    """PostgreSQL's text of a value: its type's output function (format %s), NULL kept."""
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE format('%s', {column}) END"


def _float4(value: Any) -> Any:
    return None if value is None else struct.unpack("f", struct.pack("f", value))[0]


def _money(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")


def _same(value: Any) -> Any:
    return value


def _two_dims(value: list[Any] | None) -> list[Any] | None:
    """The contract: a value with fewer dimensions than declared is wrapped."""
    return value if not value or isinstance(value[0], list) else [value]


# column: (DDL type, SQL whose psycopg value is the oracle, contract conversion of it)
Column = tuple[str, str, Callable[[Any], Any]]


def columns(tag: str, xml: bool) -> dict[str, Column]:
    cols: dict[str, Column] = {
        "b": ("bool", "b", _same),
        "i2": ("int2", "i2", _same),
        "i4": ("int4", "i4", _same),
        "i8": ("int8", "i8", _same),
        "o": ("oid", "o", _same),
        "f4": ("float4", "f4", _float4),
        "f8": ("float8", "f8", _same),
        "n": ("numeric(12,3)", "n", _same),
        "nu": ("numeric", _text("nu"), _same),
        "nbig": ("numeric(50,10)", _text("nbig"), _same),
        "nsp": ("numeric(3,5)", "nsp", _same),  # scale > precision (PostgreSQL 15+)
        "nneg": ("numeric(5,-2)", "nneg", _same),  # negative scale
        "t": ("text", "t", _same),
        "vc": ("varchar(20)", "vc", _same),
        "bp": ("char(5)", _text("bp"), _same),
        "nm": ("name", _text("nm"), _same),
        "ch": ('"char"', _text("ch"), _same),
        "by": ("bytea", "by", _same),
        "d": ("date", "d", _same),
        "tm": ("time", "tm", _same),
        "ttz": ("timetz", _text("ttz"), _same),
        "ts": ("timestamp", "ts", _same),
        "tstz": ("timestamptz", "tstz", _same),
        "iv": ("interval", _text("iv"), _same),
        "u": ("uuid", "u", _same),
        "j": ("json", _text("j"), _same),
        "jb": ("jsonb", _text("jb"), _same),
        "ip": ("inet", _text("ip"), _same),
        "cd": ("cidr", _text("cd"), _same),
        "mac": ("macaddr", _text("mac"), _same),
        "mac8": ("macaddr8", _text("mac8"), _same),
        "m": ("money", "m::numeric", _money),
        "bt": ("bit(8)", _text("bt"), _same),
        "vb": ("varbit", _text("vb"), _same),
        "xi": ("xid", "xi::text::bigint", _same),
        "lsn": ("pg_lsn", _text("lsn"), _same),
        "ia": ("int4[][]", "ia", _two_dims),
        "ta": ("text[]", "ta", _same),
        "na": ("numeric(6,2)[]", "na", _same),
        "tsa": ("timestamptz[]", "tsa", _same),
        "e": (f"mood_{tag}", "e::text", _same),
        "di": (f"posint_{tag}", "di", _same),
        "dt": (f"short_{tag}", "dt", _same),
        "ea": (f"mood_{tag}[]", "ea::text[]", _same),
    }
    if xml:
        cols["x"] = ("xml", _text("x"), _same)
    return cols


# SQL literals per column; a column not named is NULL.
ROWS: list[dict[str, str]] = [
    {"b": "true", "i2": "-32768", "i4": "2147483647", "i8": "-9223372036854775808",
     "o": "4294967295", "f4": "3.14", "f8": "2.718281828459045", "n": "-123456789.125",
     "nu": "1.50", "nsp": "0.00123", "nneg": "1234567", "xi": "'4294967295'",
     "lsn": "'16/B374D848'", "nbig": "1234567890123456789012345678901234567890.0123456789",
     "t": "'héllo ✓ 😀'", "vc": "'varchar'", "bp": "'ab'", "nm": "'a name'", "ch": "'x'",
     "by": "'\\x00ff10'::bytea", "d": "'2024-02-29'", "tm": "'23:59:59.999999'",
     "ttz": "'12:34:56.789+05:30'", "ts": "'2024-01-02 03:04:05.678901'",
     "tstz": "'1999-12-31 23:59:59.5+02'", "iv": "'1 year 2 months 3 days 04:05:06.789'",
     "u": "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
     "j": """'{"b": [1, 2.5, null], "a": "ü"}'""", "jb": """'{"k": {"n": [true, "x"]}}'""",
     "ip": "'192.168.1.5/24'", "cd": "'10.1.0.0/16'", "mac": "'08:00:2b:01:02:03'",
     "mac8": "'08:00:2b:01:02:03:04:05'", "m": "'-1234.56'", "bt": "B'10100101'",
     "vb": "B'1101'", "x": "'<a b=\"1\">t</a>'", "ia": "'{{1,NULL},{3,4}}'",
     "ta": "ARRAY['a', NULL, 'c d', '\"q\"']", "na": "'{1.5,NULL,-2.25}'",
     "tsa": "ARRAY['2020-01-01 00:00:00+00'::timestamptz, NULL]", "e": "'sad'", "di": "42",
     "dt": "'dom text'", "ea": "'{happy,NULL,sad}'"},
    {"b": "false", "i2": "32767", "i4": "-2147483648", "i8": "9223372036854775807", "o": "0",
     "f4": "'NaN'", "f8": "'-Infinity'", "n": "'NaN'", "nu": "'NaN'", "nbig": "'NaN'",
     "nsp": "-0.00001", "nneg": "-9999900", "xi": "'0'", "lsn": "'0/0'",
     "t": "''", "vc": "''", "bp": "'abcde'", "nm": "''", "ch": "''", "by": "''::bytea",
     "d": "'0001-01-01'", "tm": "'00:00:00'", "ttz": "'00:00:00-11'",
     "ts": "'0001-01-01 00:00:00'", "tstz": "'2262-04-11 23:47:16.854775+00'",
     "iv": "'-1 days -02:03:04.5'", "u": "'00000000-0000-0000-0000-000000000000'",
     "j": "'[]'", "jb": "'\"str\"'", "ip": "'::ffff:1.2.3.4'", "cd": "'2001:db8::/32'",
     "mac": "'ff:ff:ff:ff:ff:ff'", "mac8": "'00:00:00:ff:fe:00:00:00'", "m": "'0.01'",
     "bt": "B'00000000'", "vb": "B''", "x": "'plain text'", "ia": "'{}'", "ta": "'{}'",
     "na": "'{}'", "tsa": "'{}'", "e": "'ok'", "di": "1", "dt": "''", "ea": "'{}'"},
    {"f4": "'Infinity'", "f8": "'NaN'", "nu": "'-Infinity'", "ia": "'{5,NULL}'",
     "nbig": "'-0.0000000001'", "iv": "'0'", "ta": "ARRAY[NULL]::text[]",
     "n": "0.0005"},
    {},  # every column NULL
]


def has_xml(dsn: str) -> bool:
    try:
        execute(dsn, "SELECT '<a/>'::xml")
    except psycopg.errors.FeatureNotSupported:  # a server built without libxml
        return False
    return True


def create_table(dsn: str, tag: str, table: str, cols: dict[str, Column]) -> None:
    execute(dsn, f"CREATE TYPE mood_{tag} AS ENUM ('sad', 'ok', 'happy')",
            f"CREATE DOMAIN posint_{tag} AS int CHECK (VALUE > 0)",
            f"CREATE DOMAIN short_{tag} AS varchar(12)",
            f"CREATE TABLE {table} (id int PRIMARY KEY, "
            + ", ".join(f"{name} {ddl}" for name, (ddl, _, _) in cols.items()) + ")")


def insert_rows(dsn: str, table: str, cols: dict[str, Column]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for i, row in enumerate(ROWS, start=1):
            names = [n for n in row if n in cols]
            values = [row[n] for n in names]
            conn.execute(f"INSERT INTO {table} (id{''.join(', ' + n for n in names)}) "  # type: ignore[arg-type]
                         f"VALUES ({i}{''.join(', ' + v for v in values)})")
