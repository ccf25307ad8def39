"""Every type, loaded from what real PostgreSQL (15 and 18) prints and sends.

For each value PostgreSQL gives its text output (``v::text``: what pgoutput sends for tuple
kind ``t``) and its binary send output (``typsend(v)``: what pgoutput sends for kind ``b``).
Both loaders must give the same value, equal to what psycopg 3's own loaders make of the
value (an independent implementation) or to an exact reference computed by PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from connector.errors import DecodeError
from connector.pgtypes import (
    CATALOG_QUERY,
    INFINITY,
    NEG_INFINITY,
    Interval,
    OutOfRange,
    TypeCatalog,
    Unknown,
    oids,
)

pytestmark = pytest.mark.integration


def _eq(ours: Any, ref: Any) -> bool:
    return bool(ours == ref) or repr(ours) == repr(ref)  # repr: Decimal('NaN') != itself


def _json_eq(ours: Any, ref: Any) -> bool:
    return isinstance(ours, str) and json.loads(ours) == ref


@dataclass
class Case:
    sql_type: str
    values: list[str]
    ref_cast: str | None = None  # psycopg reference: the value cast to this type instead
    compare: Callable[[Any, Any], bool] = _eq
    settings: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.sql_type.replace(" ", "_")


CASES = [
    Case("bool", ["true", "false"]),
    Case("int2", ["0", "-32768", "32767"]),
    Case("int4", ["0", "-2147483648", "2147483647"]),
    Case("int8", ["0", "-9223372036854775808", "9223372036854775807"]),
    Case("oid", ["0", "4294967295", "16384"]),
    Case(
        "float4",
        [
            "0",
            "-0",
            "1.1",
            "3.4028235e38",
            "1.4e-45",
            "-2.5",
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "0.1",
            "16777217",
            "1e-10",
            "123456.79",
        ],
        compare=lambda ours, ref: ours == ref or (ours != ours and ref != ref),
    ),
    Case(
        "float8",
        [
            "0",
            "1.1",
            "1.7976931348623157e308",
            "5e-324",
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "-0.1",
        ],
        compare=lambda ours, ref: ours == ref or (ours != ours and ref != ref),
    ),
    Case(
        "numeric",
        [
            "0",
            "0.00",
            "1.50",
            "-1.5",
            "123456789012345678901234567890.123456789",
            "0.0000000001",
            "1e20",
            "-1e-20",
            "'NaN'",
            "9999.9999",
            "10000",
            "0.0001",
            "repeat('9', 1000)::numeric",
            "('1' || repeat('0', 999))::numeric",
            "('0.' || repeat('0', 500) || '1')::numeric",
            "1e-16383::numeric",
            "1e131071::numeric / 1e131071",
            "round(1/3::numeric, 1000)",
        ],
    ),
    Case("numeric", ["'Infinity'", "'-Infinity'"], compare=lambda ours, ref: ours == ref),
    Case(
        "numeric(10,2)",
        ["12345678.90", "-0.01", "0", "'NaN'"],
        compare=lambda ours, ref: ours == ref or (ours.is_nan() and ref.is_nan()),
    ),
    Case(
        "money",
        ["0", "12.34", "-12.34", "92233720368547758.07", "-92233720368547758.08", "1234567.89"],
        ref_cast="numeric",
    ),
    Case(
        "text",
        [
            "''",
            "'hello'",
            "'ünïcode ✓'",
            "E'tab\\there\\nnewline'",
            "'\"quoted\"'",
            "repeat('x', 10000)",
        ],
    ),
    Case("varchar(10)", ["'abc'", "''"]),
    Case("bpchar(5)", ["'ab'", "'abcde'"]),
    Case("name", ["'pg_class'", "''"]),
    Case('"char"', ["'a'", "''", "'\\'"]),
    Case("bytea", ["''", "'\\x00ff10'", "'abc'", "decode(repeat('00ff', 1000), 'hex')"]),
    Case(
        "bytea",
        ["''", "'\\x00ff105c'", "'abc\\\\'", "decode('ff807f1f20', 'hex')"],
        settings=["SET bytea_output = 'escape'"],
    ),
    Case("date", ["'2024-02-29'", "'0001-01-01'", "'9999-12-31'", "'1970-01-01'", "'2000-01-01'"]),
    Case("time", ["'00:00:00'", "'23:59:59.999999'", "'12:34:56.5'"]),
    Case(
        "timetz",
        [
            "'00:00:00+00'",
            "'23:59:59.999999-15:59'",
            "'12:34:56.5+05:30'",
            "'12:00:00+15:59:59'",
            "'08:00:00-03'",
        ],
    ),
    Case(
        "timestamp",
        [
            "'2024-02-29 12:34:56.123456'",
            "'0001-01-01 00:00:00'",
            "'9999-12-31 23:59:59.999999'",
            "'1970-01-01'",
            "'2000-01-01'",
        ],
    ),
    Case(
        "timestamptz",
        [
            "'2024-02-29 12:34:56.123456+00'",
            "'0001-01-01 00:00:00+00'",
            "'9999-12-31 23:59:59.999999+00'",
            "'1900-01-01 12:00:00+00'",
            "'2024-06-01 00:00:00-07'",
        ],
    ),
    Case(
        "timestamptz",
        ["'2024-02-29 12:34:56.123456+00'", "'2024-06-01 00:00:00'", "'1900-01-01 12:00:00+00'"],
        settings=["SET TimeZone = 'Asia/Kolkata'"],
    ),
    Case(
        "timestamptz",
        ["'2024-02-29 12:34:56.123456+00'", "'1900-01-01 12:00:00+00'", "'1850-01-01 12:00:00+00'"],
        settings=["SET TimeZone = 'Europe/Amsterdam'"],
    ),
    Case(
        "timestamptz",
        ["'2024-02-29 12:34:56.123456+00'", "'2024-07-01 00:00:00+00'"],
        settings=["SET TimeZone = 'America/St_Johns'"],
    ),
    Case("timestamptz", ["'1880-01-01 00:00:00+00'"], settings=["SET TimeZone = 'Asia/Kathmandu'"]),
    Case(
        "uuid", ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'"]
    ),
    Case(
        "json",
        ['\'{"a": [1, 2.5, null, "x"]}\'', "'[]'", "'\"ünï\"'", '\'  {"k":1, "k":2} \''],
        compare=_json_eq,
    ),
    Case(
        "jsonb",
        ['\'{"a": [1, 2.5, null, "x"], "b": {"c": true}}\'', "'[]'", "'\"ünï\"'", "'1e400'"],
        compare=_json_eq,
    ),
    Case(
        "inet",
        [
            "'192.168.1.5'",
            "'192.168.1.5/24'",
            "'10.0.0.0/8'",
            "'::1'",
            "'2001:db8::1/64'",
            "'::ffff:1.2.3.4/128'",
            "'0.0.0.0/0'",
        ],
    ),
    Case("cidr", ["'192.168.1.0/24'", "'10.0.0.0/8'", "'2001:db8::/32'", "'::/0'", "'1.2.3.4/32'"]),
    Case("macaddr", ["'08:00:2b:01:02:03'", "'08-00-2B-01-02-FF'"], ref_cast="text"),
    Case("macaddr8", ["'08:00:2b:01:02:03:04:05'", "'08:00:2b:01:02:03'"], ref_cast="text"),
    Case("bit(5)", ["B'10101'", "B'00000'"], ref_cast="text"),
    Case(
        "varbit", ["B''", "B'1'", "B'1010101011'", "B'11111111'", "B'111111110'"], ref_cast="text"
    ),
    Case("pg_lsn", ["'0/0'", "'16/B374D848'", "'FFFFFFFF/FFFFFFFF'"], ref_cast="text"),
    Case(
        "xid8",
        ["'0'", "'18446744073709551615'"],
        ref_cast="text",
        compare=lambda ours, ref: ours == int(ref),
    ),
    # arrays
    Case(
        "int4[]",
        [
            "'{}'",
            "'{1,2,3}'",
            "'{{1,2},{3,NULL}}'",
            "'{NULL}'",
            "'[0:1]={5,6}'",
            "'{{{1},{2}},{{3},{4}}}'",
            "array_fill(7, ARRAY[2,0])",
        ],
    ),
    Case(
        "text[]",
        [
            '\'{"a,b",NULL,"x\\"y","NULL",""," sp ","{}","back\\\\\\\\slash"}\'',
            "ARRAY['ünï', 'tab\there', E'new\\nline']",
            "'{{a,b},{NULL,\"c d\"}}'",
            "'{\"\"}'",
        ],
    ),
    Case(
        "numeric[]",
        ["'{1.50,NaN,-0.001,NULL}'", "'{{1,2},{3,4}}'"],
        compare=lambda ours, ref: repr(ours) == repr(ref),
    ),
    Case("bytea[]", ["ARRAY['\\x00ff'::bytea, NULL, '']"]),
    Case("bool[]", ["'{t,f,NULL}'"]),
    Case("float8[]", ["'{1.5,Infinity,-Infinity}'"]),
    Case("date[]", ["'{2024-01-01,NULL}'"]),
    Case("timestamptz[]", ["ARRAY['2024-01-01 00:00:00+05'::timestamptz, NULL]"]),
    Case(
        "interval[]",
        ["ARRAY['1 day'::interval, NULL, '-00:00:01']"],
        compare=lambda ours, ref: [v and v.to_timedelta() for v in ours] == ref,
    ),
    Case("uuid[]", ["ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid]"]),
    Case("jsonb[]", ["ARRAY['{\"a\": 1}'::jsonb, '[]', NULL]"], ref_cast="text[]"),
    Case("inet[]", ["'{192.168.0.1/24,::1,NULL}'"]),
    Case("varchar[]", ["'{a,\"b c\"}'"]),
    Case("bpchar(3)[]", ["'{a,bc}'"]),
    Case("money[]", ["'{1.5,-2}'"], ref_cast="numeric[]"),
    # user types
    Case(
        "mood",
        ["'sad'", "'quoted \"label\"'", "'with,comma'", "'ünïcode'", "'NULL'"],
        ref_cast="text",
    ),
    Case(
        "mood[]",
        [
            "'{sad,happy,NULL}'",
            "ARRAY['with,comma', 'quoted \"label\"', 'NULL']::mood[]",
            "'{{sad,ok},{happy,NULL}}'",
        ],
        ref_cast="text[]",
    ),
    Case("posint", ["1", "2147483647"], ref_cast="int4"),
    Case("posint[]", ["'{1,NULL,3}'"], ref_cast="int4[]"),
    Case("posint_list", ["'{1,2}'"], ref_cast="int4[]"),
    Case("label", ["'x'", "'ünï'"], ref_cast="text"),
    Case("label[]", ["'{x,NULL,\"y,z\"}'"], ref_cast="text[]"),
    Case("label_of_label", ["'deep'"], ref_cast="text"),
    Case("price", ["12.30", "-99999999.99"], ref_cast="numeric"),
    Case("good_mood", ["'happy'"], ref_cast="text"),
    Case("good_mood[]", ["'{happy,NULL}'"], ref_cast="text[]"),
]


def _io_functions(conn: psycopg.Connection, oid: int) -> tuple[str, str, str]:
    """The type's output and send functions (what pgoutput calls for kinds 't' and 'b') and
    the base type to cast a domain's value to for calling them.

    (``v::text`` is not always the output function: bool and inet have their own casts.)
    """
    row = conn.execute(
        """WITH RECURSIVE d(oid) AS (SELECT %s::oid UNION ALL
                SELECT typbasetype FROM pg_type t JOIN d USING (oid) WHERE typbasetype <> 0)
           SELECT typoutput::text, typsend::text, format_type(t.oid, NULL), t.oid::int8
           FROM pg_type t JOIN d USING (oid) WHERE typbasetype = 0""",
        [oid],
    ).fetchone()
    assert row is not None
    # a domain's value is cast to its base type (format_type gives no typmod: only domains)
    return str(row[0]), str(row[1]), f"::{row[2]}" if row[3] != oid else ""


def _catalog(conn: psycopg.Connection, type_oid: int) -> TypeCatalog:
    """A catalog taught the user types the way the producer does: the catalog query."""
    catalog = TypeCatalog()
    missing = catalog.needs_lookup([type_oid])
    if missing:
        catalog.add_rows(conn.execute(CATALOG_QUERY, [missing]).fetchall())
    assert catalog.is_known(type_oid), type_oid
    return catalog


@pytest.mark.parametrize("case", CASES, ids=[f"{c.id}-{i}" for i, c in enumerate(CASES)])
def test_text_and_binary_match_postgres(conn: psycopg.Connection, case: Case) -> None:
    for setting in case.settings:
        conn.execute(setting)
    type_oid = conn.execute("SELECT %s::regtype::oid::int8", [case.sql_type]).fetchone()[0]  # type: ignore[index]
    catalog = _catalog(conn, type_oid)
    load_text = catalog.text_loader(type_oid)
    load_binary = catalog.binary_loader(type_oid)
    output, send, base = _io_functions(conn, type_oid)
    ref_cast = case.ref_cast or case.sql_type
    for expression in case.values:
        value = f"({expression})::{case.sql_type}"
        text, binary, ref = conn.execute(
            f"SELECT {output}({value}{base})::text, {send}({value}{base}), {value}::{ref_cast}"
        ).fetchone()  # type: ignore[misc]
        from_text = load_text(text)
        from_binary = load_binary(binary)
        assert case.compare(from_text, ref), (expression, text, from_text, ref)
        assert case.compare(from_binary, ref), (expression, binary, from_binary, ref)
        assert repr(from_text) == repr(from_binary) or case.compare(from_text, from_binary), (
            expression,
            from_text,
            from_binary,
        )


def test_builtin_oids_match_the_server(conn: psycopg.Connection) -> None:
    rows = conn.execute(
        "SELECT oid::int8, typname::text, typarray::int8 FROM pg_type WHERE oid = ANY(%s)",
        [list(oids.NAMES)],
    ).fetchall()
    found = {oid: (name, array) for oid, name, array in rows}
    for oid, name in oids.NAMES.items():
        assert found[oid][0] == name, oid
        assert found[oid][1] == oids.ARRAY_OF.get(oid, 0), name


def test_vector_oids_match_the_server(conn: psycopg.Connection) -> None:
    """int2vector / oidvector: their element and array types, and an input function of their
    own (not array_in: what makes them no ordinary array)."""
    rows = conn.execute(
        "SELECT oid::int8, typelem::int8, typarray::int8, typinput::text, typlen "
        "FROM pg_type WHERE oid = ANY(%s)", [list(oids.VECTOR_OF)]).fetchall()
    assert {row[0]: row[1:] for row in rows} == {
        oid: (element, oids.VECTOR_ARRAY_OF[oid], oids.NAMES[element] + "vectorin", -1)
        for oid, element in oids.VECTOR_OF.items()}


# ------------------------------------------------------------------ values Python cannot hold


def _micros_since_1970(conn: psycopg.Connection, value: str) -> int:
    row = conn.execute(f"SELECT extract(epoch FROM {value}) * 1000000").fetchone()
    assert row is not None
    return int(row[0])  # numeric


@pytest.mark.parametrize("sql_type", ["timestamp", "timestamptz"])
def test_timestamps_beyond_python(conn: psycopg.Connection, sql_type: str) -> None:
    catalog = TypeCatalog()
    oid = oids.TIMESTAMP if sql_type == "timestamp" else oids.TIMESTAMPTZ
    send = "timestamp_send" if sql_type == "timestamp" else "timestamptz_send"
    for literal in ["'infinity'", "'-infinity'"]:
        value = f"{literal}::{sql_type}"
        text, binary = conn.execute(f"SELECT {value}::text, {send}({value})").fetchone()  # type: ignore[misc]
        expected = INFINITY if literal == "'infinity'" else NEG_INFINITY
        assert catalog.text_loader(oid)(text) is expected
        assert catalog.binary_loader(oid)(binary) is expected
    for literal in [
        "'0044-03-15 12:00:00.25 BC'",
        "'4713-11-24 00:00:00 BC'",
        "'0001-12-31 23:59:59 BC'",
        "'10000-01-01 00:00:00'",
        "'294276-12-31 23:59:59.999999'",
        "'0001-01-01 00:00:00'",
    ]:
        if sql_type == "timestamptz":
            literal = (
                literal[:-1] + "+00'" if "BC" not in literal else literal.replace(" BC", "+00 BC")
            )
        value = f"{literal}::{sql_type}"
        text, binary = conn.execute(f"SELECT {value}::text, {send}({value})").fetchone()  # type: ignore[misc]
        # exact: what PostgreSQL sends (microseconds since 2000); extract(epoch) goes through
        # a float8 at the very end of the range
        micros = struct.unpack(">q", binary)[0] + 946_684_800_000_000
        assert abs(_micros_since_1970(conn, value) - micros) < 1000
        from_text = catalog.text_loader(oid)(text)
        from_binary = catalog.binary_loader(oid)(binary)
        assert from_text == from_binary, (text, from_text, from_binary)
        if isinstance(from_text, OutOfRange):
            assert from_text.value == micros
            assert str(from_text) == text
        else:
            epoch = dt.datetime(1970, 1, 1, tzinfo=from_text.tzinfo)
            assert (from_text - epoch) // dt.timedelta(microseconds=1) == micros


def test_timestamptz_beyond_python_in_other_time_zones(conn: psycopg.Connection) -> None:
    """'0001-01-01 00:00:00+00' printed in +05:30 is still year 1; -05 pushes it to 1 BC."""
    catalog = TypeCatalog()
    load = catalog.text_loader(oids.TIMESTAMPTZ)
    for zone in ["Asia/Kolkata", "America/New_York", "Pacific/Kiritimati"]:
        conn.execute(f"SET TimeZone = '{zone}'")
        for literal in [
            "'0001-01-01 00:00:00+00'",
            "'9999-12-31 23:59:59+00'",
            "'0500-06-01 12:00:00+00 BC'",
            "'infinity'",
        ]:
            value = f"{literal}::timestamptz"
            text, binary = conn.execute(
                f"SELECT {value}::text, timestamptz_send({value})"
            ).fetchone()  # type: ignore[misc]
            assert load(text) == catalog.binary_loader(oids.TIMESTAMPTZ)(binary), (zone, text)


def test_dates_beyond_python(conn: psycopg.Connection) -> None:
    catalog = TypeCatalog()
    load_text, load_binary = catalog.text_loader(oids.DATE), catalog.binary_loader(oids.DATE)
    for literal, expected in [("'infinity'", INFINITY), ("'-infinity'", NEG_INFINITY)]:
        text, binary = conn.execute(
            f"SELECT {literal}::date::text, date_send({literal}::date)"
        ).fetchone()  # type: ignore[misc]
        assert load_text(text) is expected and load_binary(binary) is expected
    for literal in [
        "'0044-03-15 BC'",
        "'4713-01-01 BC'",
        "'0001-12-31 BC'",
        "'10000-01-01'",
        "'5874897-12-31'",
        "'0005-02-29 BC'",
    ]:
        value = f"{literal}::date"
        text, binary, days = conn.execute(
            f"SELECT {value}::text, date_send({value}), {value} - '1970-01-01'::date"
        ).fetchone()  # type: ignore[misc]
        from_text, from_binary = load_text(text), load_binary(binary)
        assert from_text == from_binary == OutOfRange("date", days), (text, from_text)
        assert str(from_text) == text


def test_time_24_00(conn: psycopg.Connection) -> None:
    catalog = TypeCatalog()
    text, binary = conn.execute("SELECT '24:00:00'::time::text, time_send('24:00:00')").fetchone()  # type: ignore[misc]
    assert catalog.text_loader(oids.TIME)(text) == catalog.binary_loader(oids.TIME)(binary)
    assert str(catalog.text_loader(oids.TIME)(text)) == text
    text, binary = conn.execute(
        "SELECT '24:00:00+05:30'::timetz::text, timetz_send('24:00:00+05:30')"
    ).fetchone()  # type: ignore[misc]
    from_text = catalog.text_loader(oids.TIMETZ)(text)
    assert from_text == catalog.binary_loader(oids.TIMETZ)(binary)
    assert str(from_text) == text


# ------------------------------------------------------------------ interval, every style

INTERVALS = [
    "'0'",
    "'1 year 2 months 3 days 04:05:06.789'",
    "'-1 year -2 months +3 days -04:05:06'",
    "'1 day -1 second'",
    "'-0.000001 seconds'",
    "'100 years'",
    "'-7 days'",
    "'1 month -1 day'",
    "'2562047788 hours 54.775807 seconds'",
    "'-2562047788 hours -54.775808 seconds'",
    "'178956970 years 7 months'",
    "'-178956970 years -8 months'",
    "'1.5 seconds'",
    "'3 days 1.000001 seconds'",
    "'-1 year +1 second'",
    "'1 year'",
    "'25 hours'",
    "make_interval(0, 0, 0, 2147483647)",
    "make_interval(0, 0, 0, -2147483648)",
]


@pytest.mark.parametrize("style", ["postgres", "postgres_verbose", "sql_standard", "iso_8601"])
def test_interval_in_every_style(conn: psycopg.Connection, style: str) -> None:
    conn.execute(f"SET IntervalStyle = '{style}'")
    catalog = TypeCatalog()
    load_text = catalog.text_loader(oids.INTERVAL)
    load_binary = catalog.binary_loader(oids.INTERVAL)
    for literal in INTERVALS:
        value = f"({literal})::interval"
        text, binary = conn.execute(f"SELECT {value}::text, interval_send({value})").fetchone()  # type: ignore[misc]
        micros, days, months = struct.unpack(">qii", binary)
        expected = Interval(months, days, micros)
        assert load_binary(binary) == expected
        assert load_text(text) == expected, (style, text)
        if style == "iso_8601":
            assert expected.isoformat() == text


def test_interval_against_psycopg(conn: psycopg.Connection) -> None:
    catalog = TypeCatalog()
    for literal in ["'3 days 04:05:06.789'", "'-1 day +00:00:01'", "'0'", "'-00:00:00.5'"]:
        text, ref = conn.execute(
            f"SELECT {literal}::interval::text, {literal}::interval"
        ).fetchone()  # type: ignore[misc]
        assert catalog.text_loader(oids.INTERVAL)(text).to_timedelta() == ref


def test_infinite_interval_on_pg17_and_later(conn: psycopg.Connection) -> None:
    if conn.info.server_version < 170000:
        pytest.skip("infinite intervals are new in PostgreSQL 17")
    catalog = TypeCatalog()
    for literal in ["'infinity'", "'-infinity'"]:
        text, binary = conn.execute(
            f"SELECT {literal}::interval::text, interval_send({literal}::interval)"
        ).fetchone()  # type: ignore[misc]
        from_text = catalog.text_loader(oids.INTERVAL)(text)
        assert from_text == catalog.binary_loader(oids.INTERVAL)(binary)
        assert from_text.is_infinite and from_text.isoformat() == text


# ------------------------------------------------------------------ unknown types


def test_composite_is_unknown_but_kept(conn: psycopg.Connection) -> None:
    catalog = TypeCatalog()
    oid = conn.execute("SELECT 'pair'::regtype::oid::int8").fetchone()[0]  # type: ignore[index]
    catalog.add_rows(conn.execute(CATALOG_QUERY, [[oid]]).fetchall())
    text, binary = conn.execute(
        "SELECT ROW(1, 'x')::pair::text, record_send(ROW(1, 'x')::pair)"
    ).fetchone()  # type: ignore[misc]
    assert catalog.text_loader(oid)(text) == Unknown(oid, "(1,x)")
    assert catalog.binary_loader(oid)(binary) == Unknown(oid, binary)
    assert not catalog.is_known(oid)


def test_money_in_c_locale_matches_numeric(conn: psycopg.Connection) -> None:
    """The test clusters run lc_monetary C: '$1,234.56'."""
    text = conn.execute("SELECT '-1234567.89'::money::text").fetchone()[0]  # type: ignore[index]
    assert text == "-$1,234,567.89"
    assert TypeCatalog().text_loader(oids.MONEY)(text) == Decimal("-1234567.89")


def test_xml(conn: psycopg.Connection) -> None:
    catalog = TypeCatalog()
    try:
        conn.execute("SELECT '<a/>'::xml")
    except psycopg.errors.FeatureNotSupported:
        pytest.skip("this server is built without libxml")
    for literal in ["'<a>b</a>'", '\'<?xml version="1.0"?><r x="ü"/>\'', "'text only'"]:
        text, binary = conn.execute(
            f"SELECT xml_out({literal}::xml)::text, xml_send({literal}::xml)"
        ).fetchone()  # type: ignore[misc]
        assert catalog.text_loader(oids.XML)(text) == text
        assert catalog.binary_loader(oids.XML)(binary) == binary.decode()
        assert "<" in text or text == "text only"


def test_bc_dates_print_like_postgresql(conn: psycopg.Connection) -> None:
    catalog = TypeCatalog()
    rows = conn.execute(
        "SELECT n, ('1970-01-01'::date - n)::text, date_send('1970-01-01'::date - n)"
        " FROM generate_series(719163, 2440588, 7919) n"
    ).fetchall()
    assert len(rows) > 200
    for n, text, binary in rows:
        value = OutOfRange("date", -n) if n > 719162 else catalog.text_loader(oids.DATE)(text)
        assert catalog.text_loader(oids.DATE)(text) == value
        assert catalog.binary_loader(oids.DATE)(binary) == value
        if isinstance(value, OutOfRange):
            assert str(value) == text


@pytest.mark.parametrize("style", ["SQL, DMY", "Postgres, MDY", "German"])
def test_other_datestyles_are_a_clear_error(conn: psycopg.Connection, style: str) -> None:
    """The producer sets DateStyle=ISO on its connection; anything else fails loudly."""
    conn.execute(f"SET DateStyle = '{style}'")
    catalog = TypeCatalog()
    for sql_type, oid in [("timestamptz", oids.TIMESTAMPTZ), ("timestamp", oids.TIMESTAMP),
                          ("date", oids.DATE)]:  # fmt: skip
        text = conn.execute(f"SELECT '2024-02-29 12:34:56'::{sql_type}::text").fetchone()[0]  # type: ignore[index]
        with pytest.raises(DecodeError, match="DateStyle ISO"):
            catalog.text_loader(oid)(text)
