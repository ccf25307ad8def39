"""Hypothesis-generated values sent through real PostgreSQL, loaded back from its text and
binary output: numeric, float4, timestamps in any time zone, intervals in every style."""

from __future__ import annotations

import struct
from decimal import Decimal

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.pgtypes import Interval, OutOfRange, TypeCatalog, oids

pytestmark = pytest.mark.integration

CATALOG = TypeCatalog()
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
PG_EPOCH_MICROS = 946_684_800_000_000


def _row(conn: psycopg.Connection, sql: str, *params: object) -> tuple[object, ...]:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return tuple(row)


def test_numeric(pgtypes_dsn: str) -> None:
    decimals = st.decimals(allow_nan=False, allow_infinity=False).filter(
        lambda d: -16383 <= d.as_tuple().exponent <= 100  # type: ignore[operator]
    )

    with psycopg.connect(pgtypes_dsn) as conn:

        @SETTINGS
        @given(decimals)
        def check(value: Decimal) -> None:
            literal = format(value, "f")
            text, binary = _row(
                conn, "SELECT numeric_out(%s::numeric)::text, numeric_send(%s::numeric)",
                literal, literal,
            )  # fmt: skip
            from_text = CATALOG.text_loader(oids.NUMERIC)(text)
            from_binary = CATALOG.binary_loader(oids.NUMERIC)(binary)
            assert from_text == value
            assert repr(from_text) == repr(from_binary), (text, from_text, from_binary)
            assert format(from_binary, "f") == text

        check()


def test_float4(pgtypes_dsn: str) -> None:
    with psycopg.connect(pgtypes_dsn) as conn:

        @SETTINGS
        @given(st.integers(0, 2**32 - 1))
        def check(bits: int) -> None:
            data = struct.pack(">I", bits)
            # the float4 with exactly these bits: its repr as a double reads back to it
            literal = repr(struct.unpack(">f", data)[0])
            text, binary = _row(
                conn, "SELECT x::text, float4send(x) FROM (SELECT %s::float4 AS x) s", literal
            )
            assert binary == data or literal == "nan"
            from_text = CATALOG.text_loader(oids.FLOAT4)(text)
            from_binary = CATALOG.binary_loader(oids.FLOAT4)(binary)
            if from_text != from_text:
                assert from_binary != from_binary
            else:
                assert from_text == from_binary, (text, from_text, from_binary)

        check()


@pytest.mark.parametrize("value", [2925711872.0, 1.1, 3.4028235e38, 1e-45])
def test_float4_whose_shortest_decimal_is_a_tie(pgtypes_dsn: str, value: float) -> None:
    """2925711872 is the float4 that 2.925712e9 -- exactly halfway to its neighbour -- rounds to;
    PostgreSQL prints 2.9257119e+09, and the binary loader must give that same double."""
    with psycopg.connect(pgtypes_dsn) as conn:
        text, binary = _row(conn, "SELECT x::text, float4send(x) FROM (SELECT %s::float4 AS x) s",
                            repr(value))
    assert CATALOG.binary_loader(oids.FLOAT4)(binary) == CATALOG.text_loader(oids.FLOAT4)(text)


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns", "Europe/Amsterdam"])
def test_timestamptz_in_session_time_zones(pgtypes_dsn: str, zone: str) -> None:
    # 4713-11-24 BC .. 294276-12-31, microseconds since 2000
    micros = st.integers(-211_813_488_000_000_000, 9_223_371_331_199_999_999)
    with psycopg.connect(pgtypes_dsn) as conn:
        conn.execute(f"SET TimeZone = '{zone}'")

        @SETTINGS
        @given(micros)
        def check(value: int) -> None:
            data = struct.pack(">q", value)
            text, ts_text = _row(
                conn,
                "SELECT (timestamptz '2000-01-01 00:00:00+00' + %s::interval)::text,"
                " (timestamp '2000-01-01' + %s::interval)::text",
                f"{value} microseconds", f"{value} microseconds",
            )  # fmt: skip
            expected = CATALOG.binary_loader(oids.TIMESTAMPTZ)(data)
            assert CATALOG.text_loader(oids.TIMESTAMPTZ)(text) == expected, text
            assert CATALOG.text_loader(oids.TIMESTAMP)(ts_text) == CATALOG.binary_loader(
                oids.TIMESTAMP
            )(data), ts_text
            if isinstance(expected, OutOfRange):
                assert expected.value == value + PG_EPOCH_MICROS

        check()


@pytest.mark.parametrize("style", ["postgres", "postgres_verbose", "sql_standard", "iso_8601"])
def test_interval_styles(pgtypes_dsn: str, style: str) -> None:
    int32 = st.integers(-(2**31) + 1, 2**31 - 2)  # the extremes are PG 17's infinities
    with psycopg.connect(pgtypes_dsn) as conn:
        conn.execute(f"SET IntervalStyle = '{style}'")

        @SETTINGS
        @given(int32, int32, st.integers(-(2**63) + 1, 2**63 - 2))
        def check(months: int, days: int, micros: int) -> None:
            text, binary = _row(
                conn,
                "WITH v(i) AS (SELECT make_interval(months => %s, days => %s)"
                " + (%s || ' microseconds')::interval)"
                " SELECT interval_out(i)::text, interval_send(i) FROM v",
                months, days, str(micros),
            )  # fmt: skip
            expected = Interval(months, days, micros)
            assert CATALOG.binary_loader(oids.INTERVAL)(binary) == expected
            assert CATALOG.text_loader(oids.INTERVAL)(text) == expected, text
            if style == "iso_8601":
                assert expected.isoformat() == text

        check()


# The one character the server refuses in text: NUL. Surrogates are not UTF-8.
_TEXTS = st.none() | st.text(st.characters(blacklist_categories=("Cs",),
                                           blacklist_characters="\x00"), max_size=12) \
    | st.text(st.sampled_from(' ,()"\\\t\nx'), max_size=6)


def test_record_text_and_binary(pgtypes_dsn: str) -> None:
    """PostgreSQL's own record_out and record_send of composites with random text attributes
    (quotes, commas, parentheses, backslashes, whitespace, empty vs NULL) parse back to each
    attribute's text and send bytes (`pgtypes.record`)."""
    from connector.pgtypes.record import parse_record_binary, parse_record_text

    with psycopg.connect(pgtypes_dsn) as conn:
        conn.execute("CREATE TEMP TABLE r (a text, b text, c int)")

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(_TEXTS, _TEXTS)
        def check(a: str | None, b: str | None) -> None:
            text, binary = _row(conn, "SELECT record_out(v)::text, record_send(v) FROM "
                                "(SELECT ROW(%s::text, %s::text, 7)::r AS v) s", a, b)
            assert parse_record_text(str(text)) == [a, b, "7"]
            assert parse_record_binary(bytes(binary)) == [  # type: ignore[arg-type]
                (oids.TEXT, None if a is None else a.encode()),
                (oids.TEXT, None if b is None else b.encode()),
                (oids.INT4, struct.pack(">i", 7))]

        check()
