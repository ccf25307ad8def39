"""Every column type of the contract (schemas/README.md) round-trips PostgreSQL → `pgcdc run`
→ Kafka → Avro decoded with its writer schema, equal to what psycopg reads from the same rows
(converted by the contract's mapping), with text and with binary tuples."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest

from tests.support.cdc_checks import execute, read_records, rows, stream_run
from tests.support.contract_table import ROWS, Column, columns, create_table, has_xml, insert_rows

pytestmark = pytest.mark.integration

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
DAYS_MAX, DAYS_MIN = 2_932_896, -719_162  # 9999-12-31, 0001-01-01
MICROS_MAX, MICROS_MIN = 253_402_300_799_999_999, -62_135_596_800_000_000


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
    xml = has_xml(postgres.dsn)
    if rows(postgres.dsn, "SHOW server_version_num")[0][0] < "160000":
        assert xml, "PostgreSQL 15 (Debian's) has xml: it must be covered"
    cols = columns(run.tag, xml)
    create_table(postgres.dsn, run.tag, table, cols)
    run.start(log_dir)
    insert_rows(postgres.dsn, table, cols)
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


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_vectors_and_unsigned_64_bit_values(postgres, producer_run, log_dir,
                                            binary: bool) -> None:
    """oidvector / int2vector (space-separated text, array_send binary) are arrays of long /
    int; xid8 is decimal(20,0) up to 2^64 - 1; oid, xid, cid hold 2^32 - 1 in their long.
    Each of these once stopped `pgcdc run` at the same transaction on every restart."""
    run = stream_run(producer_run, *(["--binary"] if binary else []))
    table = f"vec_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, ov oidvector, "
                          "iv int2vector, x8 xid8, o oid, xi xid, c cid, ovs oidvector[])")
    run.start(log_dir)
    execute(postgres.dsn,
            f"INSERT INTO {table} VALUES (1, '1 2 3 4 5 6 7 8', '1 -2 32767', "
            "'18446744073709551615', 4294967295, '4294967295', '4294967295', "
            "ARRAY['1 2'::oidvector, '4294967295'::oidvector]), "
            "(2, '', '', '0', 0, '0', '0', '{}'), "
            "(3, '4294967295', '-32768', '9223372036854775808', NULL, NULL, NULL, NULL)")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=3)
    got = {r.value["after"]["id"]: r.value["after"] for r in records}
    top = 2**32 - 1
    assert got[1] == {"id": 1, "ov": [1, 2, 3, 4, 5, 6, 7, 8], "iv": [1, -2, 32767],
                      "x8": Decimal(2**64 - 1), "o": top, "xi": top, "c": top,
                      "ovs": [1, 2, top]}
    assert got[2] == {"id": 2, "ov": [], "iv": [], "x8": Decimal(0), "o": 0, "xi": 0, "c": 0,
                      "ovs": []}
    assert got[3] == {"id": 3, "ov": [top], "iv": [-32768], "x8": Decimal(2**63), "o": None,
                      "xi": None, "c": None, "ovs": None}


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_domains_take_their_base_types_mapping(postgres, producer_run, log_dir,
                                               binary: bool) -> None:
    """A domain over numeric(8,2), or over such a domain, is a decimal(8,2) like its base;
    arrays of domains and of composites are arrays of their elements' mapping (a composite:
    its text). Whether the
    types exist when `pgcdc run` starts (then it looks them up first) or are created while it
    streams (then pgoutput's Type messages come first) makes no difference."""
    run = stream_run(producer_run, *(["--binary"] if binary else []))
    tag = run.tag
    table = f"dom_{tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, n numeric(8,2))")
    run.start(log_dir)
    execute(postgres.dsn, f"CREATE DOMAIN money82_{tag} AS numeric(8,2)",
            f"CREATE DOMAIN price_{tag} AS money82_{tag} CHECK (VALUE > 0)",
            f"CREATE TYPE pair_{tag} AS (a int, b text)",
            f"ALTER TABLE {table} ADD COLUMN d money82_{tag}, ADD COLUMN ds money82_{tag}[], "
            f"ADD COLUMN ps pair_{tag}[], ADD COLUMN p pair_{tag}, ADD COLUMN dd price_{tag}")
    execute(postgres.dsn,
            f"INSERT INTO {table} VALUES (1, 1.5, 1.5, ARRAY[2.25, NULL]::money82_{tag}[], "
            f"ARRAY[ROW(1, 'x')::pair_{tag}, ROW(2, NULL)::pair_{tag}], ROW(3, 'z y'), 7)")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=1)
    after = records[0].value["after"]
    if binary:  # composites have no text in a binary tuple: their bytes, as hex text
        assert isinstance(after["p"], str) and after["p"].startswith("\\x")
        after["p"] = after["ps"] = None
    else:
        assert after["p"] == '(3,"z y")' and after["ps"] == ["(1,x)", "(2,)"]
        after["p"] = after["ps"] = None
    assert after == {"id": 1, "n": Decimal("1.50"), "d": Decimal("1.50"),
                     "ds": [Decimal("2.25"), None], "ps": None, "p": None,
                     "dd": Decimal("7.00")}


def test_a_user_type_with_an_element_type_is_not_taken_for_an_array(postgres, producer_run,
                                                                      log_dir) -> None:
    """A base type with ELEMENT and its own input function (here int2vector's) is no array:
    its values are their text (it once parsed them as '{...}' and stopped the stream)."""
    run = stream_run(producer_run)
    tag = run.tag
    table = f"uvec_{tag}"
    t = f"myvec_{tag}"
    execute(postgres.dsn, f"CREATE TYPE {t}",
            *(f"CREATE FUNCTION {t}_{fn}({arg}) RETURNS {ret} AS '{internal}' LANGUAGE internal "
              "STRICT IMMUTABLE"
              for fn, arg, ret, internal in (("in", "cstring", t, "int2vectorin"),
                                             ("out", t, "cstring", "int2vectorout"),
                                             ("recv", "internal", t, "int2vectorrecv"),
                                             ("send", t, "bytea", "int2vectorsend"))),
            f"CREATE TYPE {t} (INPUT = {t}_in, OUTPUT = {t}_out, RECEIVE = {t}_recv, "
            f"SEND = {t}_send, ELEMENT = int2, SUBSCRIPT = raw_array_subscript_handler, "
            "INTERNALLENGTH = VARIABLE)",
            f"CREATE TABLE {table} (id int PRIMARY KEY, v {t})")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (1, '1 2 3'), (2, '')")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=2)
    assert {r.value["after"]["id"]: r.value["after"]["v"] for r in records} == {1: "1 2 3",
                                                                                2: ""}


def test_vectors_and_xid8_in_the_initial_snapshot(postgres, producer_run, log_dir) -> None:
    """The snapshot reads rows with COPY (the C row encoder's copy path, declining to Python
    for these types): the same values as the stream, under the same schema."""
    run = producer_run("-")
    run.tables = f"public.*{run.tag}*"
    table = f"svec_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, ov oidvector, "
                          "iv int2vector, x8 xid8)",
            f"INSERT INTO {table} VALUES (1, '1 4294967295', '-1 2', '18446744073709551615')")
    run.start(log_dir)
    execute(postgres.dsn, f"INSERT INTO {table} VALUES (2, '', '7', '9223372036854775808')")
    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=2)
    got = {r.value["op"]: r.value["after"] for r in records}
    assert got == {
        "r": {"id": 1, "ov": [1, 2**32 - 1], "iv": [-1, 2], "x8": Decimal(2**64 - 1)},
        "c": {"id": 2, "ov": [], "iv": [7], "x8": Decimal(2**63)}}
    assert len({r.value_schema_id for r in records}) == 1
