"""The C row encoder (connector/native/rowenc.c) gives byte for byte the Python path's keys and
Envelopes -- or the Python path's very error -- for any pgoutput values: PostgreSQL's canonical
text, the odd forms the C parsers hand back to Python (infinities, BC dates, NaN, overflowing
numbers, other spellings), binary values, NULL and unchanged TOAST."""

from __future__ import annotations

import datetime as dt
import os
import struct
import time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg._copy_base import _parse_row_text as parse_row_text  # psycopg's Python twin
from psycopg.adapt import Transformer
from psycopg.pq import Format

from connector.avro import SourceInfo, TableCodec, TransactionBlock, decode, derive_table_schemas
from connector.pgoutput.messages import UNCHANGED_TOAST, BinaryValue
from connector.pgtypes import oids
from connector.snapshot.copytext import parse_copy_text
from connector.speedups import native, native_setting
from tests.support.avro import catalog, column, copy_line, numeric_typmod, relation

# This module compares the C writer with the Python one itself (conftest.py runs it once).
COMPARES_BOTH_WRITERS = True


def test_the_extension_is_built() -> None:
    """CI builds the extension; a silently missing one would leave only the slow path."""
    if native_setting(os.environ) == "off":
        pytest.skip("PGCDC_NATIVE=off: the pure-Python path is asked for")
    assert native is not None, "connector._native is not built: run `pip install -e .`"


def test_c_and_python_share_their_constants() -> None:
    """The envelope reads SourceInfo by position and the plans name the C parsers: both sides
    must mean the same fields and kinds (one source each: the extension's own tables)."""
    if native is None:
        pytest.skip("the pure-Python path: no C constants to agree with")
    assert native.SOURCE_FIELDS == SourceInfo._fields
    from connector.avro.native_rows import _KIND_NAMES

    assert set(_KIND_NAMES.values()) <= set(native.ROW_KINDS)
    assert sorted(native.ROW_KINDS.values()) == list(range(len(native.ROW_KINDS)))


def _pg_time(value: dt.time) -> str:
    text = value.strftime("%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text


def _pg_date(value: dt.date) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _pg_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}" + (f":{m:02d}" if m or s else "") + (f":{s:02d}" if s else "")


ODD_VALUES = ["", " 1", "+1", "1 ", "Infinity", "-Infinity", "infinity", "-infinity", "NaN",
              "nan", "1e5", "0044-03-15 BC", "24:00:00", "x", "1.", ".5", "-",
              "99999999999999999999", "-9223372036854775808", "1_000", "٣"]
ODD = st.sampled_from(ODD_VALUES)
INTS = st.integers(-(2**63), 2**63 - 1).map(str)
DATES = st.dates().map(_pg_date)
TIMES = st.times().map(_pg_time)
STAMPS = st.datetimes().map(lambda v: f"{_pg_date(v)} {_pg_time(v.time())}")
OFFSETS = st.integers(-15 * 3600 - 59 * 60, 15 * 3600 + 59 * 60).map(_pg_offset)
DECIMALS = st.decimals(min_value=Decimal("-9999999999.99"), max_value=Decimal("9999999999.99"),
                       places=2, allow_nan=False).map(lambda d: format(d, "f"))

# (name, type OID, typmod, strategy of canonical text)
COLUMNS: list[tuple[str, int, int, Any]] = [
    ("id", oids.INT8, -1, INTS),
    ("i2", oids.INT2, -1, st.integers(-(2**15), 2**15 - 1).map(str)),
    ("i4", oids.INT4, -1, st.integers(-(2**31), 2**31 - 1).map(str)),
    ("o", oids.OID, -1, st.integers(0, 2**32 - 1).map(str)),
    ("n", oids.NUMERIC, numeric_typmod(12, 2), DECIMALS),
    # beyond the declared precision too: both paths encode such a value as it is
    ("n0", oids.NUMERIC, numeric_typmod(6, 0), st.integers(-10**12, 10**12).map(str)),
    ("nbig", oids.NUMERIC, numeric_typmod(30, 8),
     st.decimals(min_value=-10**21, max_value=10**21, places=8,
                 allow_nan=False).map(lambda d: format(d, "f"))),
    ("nfree", oids.NUMERIC, -1, st.decimals(allow_nan=False, allow_infinity=False).map(str)),
    ("f8", oids.FLOAT8, -1, st.floats(allow_nan=False, allow_infinity=False).map(repr)),
    ("f4", oids.FLOAT4, -1, st.floats(width=32, allow_nan=False,
                                      allow_infinity=False).map(repr)),
    ("t", oids.TEXT, -1, st.text()),
    ("vc", oids.VARCHAR, -1, st.text(max_size=5)),
    ("bp", oids.BPCHAR, -1, st.text(max_size=5)),
    ("j", oids.JSONB, -1, st.text(max_size=8)),
    ("b", oids.BOOL, -1, st.sampled_from(["t", "f"])),
    ("d", oids.DATE, -1, DATES),
    ("tm", oids.TIME, -1, TIMES),
    ("ts", oids.TIMESTAMP, -1, STAMPS),
    ("tz", oids.TIMESTAMPTZ, -1, st.tuples(STAMPS, OFFSETS).map("".join)),
    ("u", oids.UUID, -1, st.uuids().map(str)),
    ("iv", oids.INTERVAL, -1, st.sampled_from(["1 day 02:00:00", "-00:00:01.5", "3 mons"])),
    ("arr", 1007, -1, st.sampled_from(["{1,2,NULL}", "{}", "{{1},{2}}"])),
]
KEY = {"id", "tz"}

def _packed(fmt: str, values: Any) -> Any:
    return values.map(lambda v: BinaryValue(struct.pack(fmt, v)))


INT64 = st.integers(-(2**63), 2**63 - 1)
BINARY = {  # the send functions' output, and the odd widths and values around it
    "id": _packed("!q", INT64),
    "i2": _packed("!h", st.integers(-(2**15), 2**15 - 1)),
    "i4": _packed("!i", st.integers(-(2**31), 2**31 - 1)),
    "o": _packed("!I", st.integers(0, 2**32 - 1)),
    "f8": _packed("!d", st.floats()),
    "f4": _packed("!f", st.floats(width=32)),
    "t": st.text().map(lambda s: BinaryValue(s.encode())),
    "vc": st.sampled_from([BinaryValue(b"\xff"), BinaryValue(b"\xed\xa0\x80"),
                           BinaryValue("é".encode())]),
    "j": st.text(max_size=5).map(lambda s: BinaryValue(b"\x01" + s.encode())),
    "b": st.sampled_from([BinaryValue(b"\x01"), BinaryValue(b"\x00"), BinaryValue(b"\x02")]),
    "d": _packed("!i", st.one_of(st.integers(-(2**31), 2**31 - 1),
                                 st.sampled_from([2**31 - 1, -(2**31), -730119, -730120,
                                                  2921939, 2921940]))),
    "tm": _packed("!q", st.one_of(st.integers(-1, 86_400_000_001),
                                  st.sampled_from([0, 86_399_999_999, 86_400_000_000]))),
    "ts": _packed("!q", st.one_of(INT64, st.integers(-(10**17), 10**17))),
    "tz": _packed("!q", st.one_of(INT64, st.sampled_from([2**63 - 1, -(2**63),
                                                          -63_082_281_600_000_000,
                                                          -63_082_281_600_000_001,
                                                          252_455_615_999_999_999,
                                                          252_455_616_000_000_000,
                                                          # timestamptz's clamp bounds
                                                          -63_082_108_800_000_000,
                                                          -63_082_108_800_000_001,
                                                          252_455_529_599_999_999,
                                                          252_455_529_600_000_000]))),
    "u": st.binary(min_size=16, max_size=16).map(BinaryValue),
}
GARBAGE = st.binary(max_size=17).map(BinaryValue)  # any width, any bytes


def _value(name: str, canonical: Any) -> Any:
    options = [canonical, canonical, canonical, st.none(), st.just(UNCHANGED_TOAST), ODD,
               GARBAGE]
    if name in BINARY:
        options += [BINARY[name], BINARY[name]]
    return st.one_of(*options)


ROW = st.tuples(*(_value(name, canonical) for name, _, _, canonical in COLUMNS))


def _codecs() -> tuple[TableCodec, TableCodec]:
    rel = relation(*(column(name, oid, typmod, key=name in KEY)
                     for name, oid, typmod, _ in COLUMNS))
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d")
    fast = TableCodec(schemas, 21, 22, catalog())
    reference = TableCodec(schemas, 21, 22, catalog())
    reference._plan = None  # the Python writer throughout: rows and envelope
    reference._frame.native = None
    return fast, reference


FAST, REFERENCE = _codecs()
SOURCE = SourceInfo(0x16B3748, 3, 1_700_000_000_000, 731, 0x16B3700)
BLOCK = TransactionBlock("731:23803720", 4, 2)


def _outcome(call: Any) -> Any:
    try:
        return call()
    except Exception as exc:  # the same error, word for word
        return type(exc), str(exc)


def test_the_plan_covers_the_fast_kinds() -> None:
    if native is None:
        pytest.skip("the extension is not built")
    assert FAST._plan is not None


@settings(max_examples=400, deadline=None)
@given(ROW, ROW)
def test_native_rows_equal_the_python_path(old: tuple[Any, ...], new: tuple[Any, ...]) -> None:
    for op, before, after in (("c", None, new), ("r", None, new), ("d", old, None),
                              ("u", old, new)):
        for kwargs in ({"ts_ms": 5, "transaction": BLOCK}, {"ts_ms": 5, "with_key": False}):
            args = (op, before, after, SOURCE)
            ours = _outcome(lambda: FAST.change_from_tuples(*args, **kwargs))  # noqa: B023
            theirs = _outcome(lambda: REFERENCE.change_from_tuples(*args, **kwargs))  # noqa: B023
            assert ours == theirs
    assert _outcome(lambda: FAST.key_from_tuple(new)) == _outcome(
        lambda: REFERENCE.key_from_tuple(new))


@pytest.mark.parametrize("value", ["99989299", "-99989299", "1234567890123", "1000000"])
def test_a_numeric_beyond_its_precision_gets_the_same_fallback(
        value: str, caplog: pytest.LogCaptureFixture) -> None:
    """numeric(6,0) and 99989299: C encoded it (a reader then rounds it to 6 digits), Python
    raised a bare decimal.InvalidOperation. Both now publish the fallback (null: a decimal
    cannot hold a text), warning with table and column."""
    index = [c[0] for c in COLUMNS].index("n0")
    row = tuple(value if i == index else None for i in range(len(COLUMNS)))
    fast = _outcome(lambda: FAST.change_from_tuples("c", None, row, SOURCE, ts_ms=5))
    assert fast == _outcome(lambda: REFERENCE.change_from_tuples("c", None, row, SOURCE,
                                                                  ts_ms=5))
    assert decode(fast[1], lambda _: FAST.schemas.value_schema).value["after"]["n0"] is None
    assert "column 'n0'" in caplog.text and "does not fit numeric(6,0)" in caplog.text


def test_a_numeric_at_its_precision_takes_the_c_path() -> None:
    if native is None:
        pytest.skip("the extension is not built")
    index = [c[0] for c in COLUMNS].index("n0")
    row = tuple("-999999" if i == index else None for i in range(len(COLUMNS)))
    assert FAST._plan.change(FAST._frame.native, FAST._key_header, "c", None, row, SOURCE, 5,
                             None, True) is not None


@pytest.mark.parametrize("row", [(), ("1",), tuple("1" for _ in range(len(COLUMNS) + 1))])
def test_a_row_of_the_wrong_width_gets_the_python_error(row: tuple[str, ...]) -> None:
    assert _outcome(lambda: FAST.change_from_tuples("c", None, row, SOURCE)) == _outcome(
        lambda: REFERENCE.change_from_tuples("c", None, row, SOURCE))
    assert _outcome(lambda: FAST.key_from_tuple(row)) == _outcome(
        lambda: REFERENCE.key_from_tuple(row))


def test_unchanged_toast_is_listed_in_the_envelope() -> None:
    row = tuple(UNCHANGED_TOAST if name == "t" else None for name, _, _, _ in COLUMNS)
    row = ("7",) + row[1:]
    fast = FAST.change_from_tuples("u", None, row, SOURCE, ts_ms=5)
    assert fast == REFERENCE.change_from_tuples("u", None, row, SOURCE, ts_ms=5)
    assert fast[1].endswith(b"\x02\x02t\x00\x00")  # unchanged_toast: ["t"], unparsed: null


def _unparsed_row(**values: Any) -> tuple[Any, ...]:
    return tuple(values.get(name) for name, _, _, _ in COLUMNS)


def test_typed_fallbacks_are_listed_in_unparsed_by_both_writers() -> None:
    """A typed column whose value falls back is null in its row and its exact text (a binary
    value's \\x + hex) is in `unparsed`: after's under the field name, before's under
    "before." + it, in column order; a string column keeps its text in place, unlisted. The C
    writer's bytes are the Python writer's, by the tuple path and by the COPY path."""
    old = _unparsed_row(id="1", b="yes", d=BinaryValue(b"\x01"), t="kept")
    new = _unparsed_row(id="1", i4="4294967296", n0="99989299", b="t",
                        iv=BinaryValue(b"\x02"), tz="not a time")
    for op, before, after in (("u", old, new), ("d", old, None), ("c", None, new)):
        fast = FAST.change_from_tuples(op, before, after, SOURCE, ts_ms=5, transaction=BLOCK)
        assert fast == REFERENCE.change_from_tuples(op, before, after, SOURCE, ts_ms=5,
                                                    transaction=BLOCK)
        event = decode(fast[1], lambda _: FAST.schemas.value_schema).value
        expected = {}
        if before is not None:
            expected |= {"before.b": "yes", "before.d": "\\x01"}
            assert event["before"]["b"] is None and event["before"]["d"] is None
            assert event["before"]["t"] == "kept"
        if after is not None:
            expected |= {"i4": "4294967296", "n0": "99989299", "tz": "not a time"}
            assert [event["after"][n] for n in ("i4", "n0", "tz")] == [None, None, None]
            assert event["after"]["iv"] == "\\x02"  # a string: the text in place
            assert event["after"]["b"] is True
        assert event["unparsed"] == expected
        assert list(event["unparsed"]) == list(expected)
    line = copy_line(_unparsed_row(id="1", i4="4294967296",
                                                               tz="not a time", t="x"))
    copied = _from_copy(line)
    assert copied == REFERENCE.change_from_tuples("r", None, parse_copy_text(line), SOURCE,
                                                  ts_ms=5)
    assert decode(copied[1], lambda _: FAST.schemas.value_schema).value["unparsed"] == {
        "i4": "4294967296", "tz": "not a time"}


def test_an_event_without_fallbacks_has_null_unparsed() -> None:
    fast = FAST.change_from_tuples("c", None, _unparsed_row(id="1", i4="4"), SOURCE, ts_ms=5)
    assert fast == REFERENCE.change_from_tuples("c", None, _unparsed_row(id="1", i4="4"),
                                                SOURCE, ts_ms=5)
    assert fast[1].endswith(b"\x00\x00")  # unchanged_toast: [], unparsed: null
    assert decode(fast[1], lambda _: FAST.schemas.value_schema).value["unparsed"] is None


def test_the_c_path_lists_unparsed_itself() -> None:
    """A row with a typed fallback stays on the C path (the piece hands it the text)."""
    if native is None:
        pytest.skip("the extension is not built")
    line = copy_line(_unparsed_row(id="1", b="maybe"))
    event = FAST.change_from_copy("r", line, SOURCE, ts_ms=5)
    assert event is not None
    assert FAST._plan.change(FAST._frame.native, FAST._key_header, "u",
                             _unparsed_row(id="1", b="no"), _unparsed_row(id="1", b="maybe"),
                             SOURCE, 5, None, True) is not None
    assert decode(event[1], lambda _: FAST.schemas.value_schema).value["unparsed"] == {
        "b": "maybe"}


def test_an_envelope_without_ts_ms_carries_the_current_time() -> None:
    row = tuple("1" if name in ("id", "i2") else None for name, _, _, _ in COLUMNS)
    before_ms = time.time_ns() // 1_000_000
    _, value = FAST.change_from_tuples("c", None, row, SOURCE)
    after_ms = time.time_ns() // 1_000_000
    decoded = decode(value, lambda _id: FAST.schemas.value_schema)
    assert before_ms <= decoded.value["ts_ms"] <= after_ms


# ------------------------------------------------------------------ COPY text lines

TEXT_ROW = st.tuples(*(st.one_of(canonical, canonical, st.none(), ODD)
                       for _, _, _, canonical in COLUMNS))


def _from_copy(line: bytes) -> Any:
    return FAST.change_from_copy("r", line, SOURCE, ts_ms=5)


@settings(max_examples=400, deadline=None)
@given(TEXT_ROW, st.booleans())
def test_copy_lines_encode_as_their_parsed_values(row: tuple[Any, ...], newline: bool) -> None:
    line = copy_line(row) + (b"\n" if newline else b"")
    expected = _outcome(lambda: REFERENCE.change_from_tuples("r", None, row, SOURCE, ts_ms=5))
    assert _outcome(lambda: _from_copy(line)) == expected


def test_a_line_of_canonical_values_takes_the_c_path() -> None:
    if native is None:
        pytest.skip("the extension is not built")
    row = ("5", "1", "2", "3", "-12.50", "7", "1.00000000", "1.5", "1.25", "2.5", "a\\tb", "v",
           "b", '{"k": 1}', "t", "2026-11-22", "02:23:01.5", "2026-11-22 02:23:01",
           "2026-11-22 02:23:01.123+05:30", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "1 day",
           "{1}")
    line = "\t".join(row).encode()
    event = FAST.change_from_copy("r", line, SOURCE, ts_ms=5)
    assert event is not None
    assert event == REFERENCE.change_from_tuples("r", None, parse_copy_text(line), SOURCE,
                                                 ts_ms=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"\t", b"\\", b"N", b"n", b"t", b"1", b"\xc3", b"\xa9",
                                 b"\xed\xa0\x80", b"\xff", b"-", b":", b" ", b"\n", b"2"]),
                max_size=60).map(b"".join))
def test_any_line_gets_the_python_result_or_error(line: bytes) -> None:
    def python_way() -> Any:
        return REFERENCE.change_from_tuples("r", None, parse_copy_text(line), SOURCE, ts_ms=5)

    assert _outcome(lambda: _from_copy(line)) == _outcome(python_way)


@given(TEXT_ROW)
@settings(max_examples=200, deadline=None)
def test_parse_copy_text_equals_psycopgs_row_parser(row: tuple[Any, ...]) -> None:
    line = copy_line(row) + b"\n"
    transformer = Transformer()
    transformer.set_loader_types([oids.TEXT] * len(row), Format.TEXT)
    assert parse_copy_text(line) == row == parse_row_text(line, transformer)


@pytest.mark.parametrize("index", range(len(COLUMNS)), ids=[c[0] for c in COLUMNS])
def test_every_odd_value_in_every_column(index: int) -> None:
    """Each odd spelling alone in each column (hypothesis may not combine them all)."""
    for odd in ODD_VALUES:
        row = tuple(odd if i == index else None for i in range(len(COLUMNS)))
        assert _outcome(lambda: FAST.change_from_tuples("c", None, row, SOURCE, ts_ms=5)) == \
            _outcome(lambda: REFERENCE.change_from_tuples("c", None, row, SOURCE, ts_ms=5))  # noqa: B023
        line = copy_line(row)
        assert _outcome(lambda: _from_copy(line)) == _outcome(  # noqa: B023
            lambda: REFERENCE.change_from_tuples("r", None, row, SOURCE, ts_ms=5))  # noqa: B023
