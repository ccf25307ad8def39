"""Every column type of the contract (schemas/README.md) round-trips PostgreSQL → `pgcdc run`
→ Kafka → Avro decoded with its writer schema, equal to what psycopg reads from the same rows
(converted by the contract's mapping), with text and with binary tuples."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from cdc_checks import execute, read_records, rows, stream_run

pytestmark = pytest.mark.integration

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
DAYS_MAX, DAYS_MIN = 2_932_896, -719_162  # 9999-12-31, 0001-01-01
MICROS_MAX, MICROS_MIN = 253_402_300_799_999_999, -62_135_596_800_000_000


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


def _has_xml(dsn: str) -> bool:
    try:
        execute(dsn, "SELECT '<a/>'::xml")
    except psycopg.errors.FeatureNotSupported:  # a server built without libxml
        return False
    return True


def _create(dsn: str, tag: str, table: str, cols: dict[str, Column]) -> None:
    execute(dsn, f"CREATE TYPE mood_{tag} AS ENUM ('sad', 'ok', 'happy')",
            f"CREATE DOMAIN posint_{tag} AS int CHECK (VALUE > 0)",
            f"CREATE DOMAIN short_{tag} AS varchar(12)",
            f"CREATE TABLE {table} (id int PRIMARY KEY, "
            + ", ".join(f"{name} {ddl}" for name, (ddl, _, _) in cols.items()) + ")")


def _insert(dsn: str, table: str, cols: dict[str, Column]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for i, row in enumerate(ROWS, start=1):
            names = [n for n in row if n in cols]
            values = [row[n] for n in names]
            conn.execute(f"INSERT INTO {table} (id{''.join(', ' + n for n in names)}) "  # type: ignore[arg-type]
                         f"VALUES ({i}{''.join(', ' + v for v in values)})")


def _oracle(dsn: str, table: str, cols: dict[str, Column]) -> dict[int, dict[str, Any]]:
    query = f"SELECT id, {', '.join(sql for _, sql, _ in cols.values())} FROM {table}"
    found = rows(dsn, query, "SET IntervalStyle = 'iso_8601'", "SET DateStyle = 'ISO'",
                 "SET TimeZone = 'UTC'")
    return {row[0]: {name: convert(value) for (name, (_, _, convert)), value
                     in zip(cols.items(), row[1:], strict=True)} for row in found}


def _equal(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float) and math.isnan(want):
        return math.isnan(got)
    if isinstance(want, Decimal) and isinstance(got, Decimal):
        return got == want and got.as_tuple().exponent == want.as_tuple().exponent
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_equal(g, w) for g, w in zip(got, want, strict=True))
    return bool(got == want) and type(got) is type(want)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_every_type_round_trips(postgres, producer_run, log_dir, binary: bool) -> None:
    run = stream_run(producer_run, *(["--binary"] if binary else []))
    table = f"types_{run.tag}"
    xml = _has_xml(postgres.dsn)
    if rows(postgres.dsn, "SHOW server_version_num")[0][0] < "160000":
        assert xml, "PostgreSQL 15 (Debian's) has xml: it must be covered"
    cols = columns(run.tag, xml)
    _create(postgres.dsn, run.tag, table, cols)
    run.start(log_dir)
    _insert(postgres.dsn, table, cols)
    oracle = _oracle(postgres.dsn, table, cols)
    for row in oracle.values():  # the numeric(p,s) NaN of the contract: null
        if isinstance(row["n"], Decimal) and row["n"].is_nan():
            row["n"] = None
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=len(ROWS))
    assert len(records) == len(ROWS)
    mismatches = []
    for record in records:
        after = record.value["after"]
        assert record.key == {"id": after["id"]}
        for name, want in oracle[after["id"]].items():
            if not _equal(after[name], want):
                mismatches.append(f"row {after['id']} {name} ({cols[name][0]}): "
                                  f"got {after[name]!r}, want {want!r}")
    assert not mismatches, "\n".join(mismatches)
    json_row = next(r.value["after"] for r in records if r.value["after"]["id"] == 1)
    assert json.loads(json_row["j"]) == {"b": [1, 2.5, None], "a": "ü"}


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_infinite_dates_and_timestamps(postgres, producer_run, log_dir, binary: bool) -> None:
    """±infinity of date / timestamp / timestamptz: clamped to 0001-01-01 .. 9999-12-31
    (timestamptz: 0001-01-03 .. 9999-12-30 23:59:59.999999 UTC), on the C path (binary) and
    the Python one alike."""
    run = stream_run(producer_run, *(["--binary"] if binary else []))
    table = f"inf_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, d date, ts timestamp, "
                          "tstz timestamptz, da date[])")
    run.start(log_dir)
    execute(postgres.dsn,
            f"INSERT INTO {table} VALUES (1, 'infinity', 'infinity', 'infinity', "
            "'{infinity,-infinity,NULL}'), (2, '-infinity', '-infinity', '-infinity', NULL), "
            "(3, '1970-01-02', '1970-01-01 00:00:01', '1969-12-31 23:59:59.999999+00', "
            "'{1970-01-01}')")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=3, logical_types=False)
    got = {r.value["after"]["id"]: r.value["after"] for r in records}
    day = 86_400_000_000
    assert got[1] == {"id": 1, "d": DAYS_MAX, "ts": MICROS_MAX, "tstz": MICROS_MAX - day,
                      "da": [DAYS_MAX, DAYS_MIN, None]}
    assert got[2] == {"id": 2, "d": DAYS_MIN, "ts": MICROS_MIN, "tstz": MICROS_MIN + 2 * day,
                      "da": None}
    assert got[3] == {"id": 3, "d": 1, "ts": 1_000_000, "tstz": -1, "da": [0]}
