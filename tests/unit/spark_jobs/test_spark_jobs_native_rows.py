"""The C decoder of change events (connector/native/avrodec.c, compiled per writer schema by
spark_jobs/events/row_program.py) against fastavro, the reference.

For every body the C side gives the rows fastavro's path gives -- the same dict keys in the same
order, values of the same types (Decimal with its exponent, bool, bytes, -0.0) -- or declines
(None), and then `decode_rows` decodes the batch with fastavro, whose result or NotForRows it
is. Random values of every Avro type the compile step takes, written by fastavro; random
corruptions of valid bodies; the schemas it leaves to fastavro."""

from __future__ import annotations

import copy
import io
import os
import tracemalloc
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from connector.speedups import native, native_setting
from spark_jobs.events import row_program
from spark_jobs.events.rows import (
    NotForRows,
    TopicRows,
    WriterSchema,
    _decode_python,
    decode_rows,
)
from tests.support.events import LocalRegistry, table_events

needs_native = pytest.mark.skipif(native is None,
                                  reason="C extension not built or PGCDC_NATIVE=off")


def _nullable(t: Any) -> list[Any]:
    return ["null", t]


# The Value record's fields: every Avro type the compile step takes, most of them nullable.
FIELDS: list[tuple[str, Any]] = [
    ("id", "long"),
    ("b", _nullable("boolean")),
    ("i", _nullable("int")),
    ("l", _nullable("long")),
    ("f", _nullable("float")),
    ("d", _nullable("double")),
    ("s", _nullable("string")),
    ("by", _nullable("bytes")),
    ("fx", _nullable({"type": "fixed", "name": "F3", "size": 3})),
    ("dec", _nullable({"type": "bytes", "logicalType": "decimal", "precision": 18,
                       "scale": 4})),
    ("wide", _nullable({"type": "bytes", "logicalType": "decimal", "precision": 40,
                        "scale": 3})),
    ("dfx", _nullable({"type": "fixed", "name": "D8", "size": 8, "logicalType": "decimal",
                       "precision": 18, "scale": 2})),
    ("e", _nullable({"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]})),
    ("arr", _nullable({"type": "array", "items": ["null", "long"]})),
    ("m", _nullable({"type": "map", "values": "string"})),
    ("rec", _nullable({"type": "record", "name": "Inner", "fields": [
        {"name": "x", "type": "double"}, {"name": "y", "type": ["null", "string"]},
        {"name": "z", "type": {"type": "array", "items": "bytes"}}]})),
    ("multi", ["null", "string", "long"]),
    ("s2", "string"),
    ("fx2", "F3"),  # a named type used again
]


def envelope(fields: Sequence[tuple[str, Any]] = FIELDS) -> dict[str, Any]:
    """The producer's Envelope schema (its own, from a registered table) around a Value record
    of `fields`."""
    registry = LocalRegistry()
    t = table_events(registry, "p", "s", "t", [("id", "int8")], ["id"])
    schema = copy.deepcopy(registry.schemas[t.value_id])
    value = schema["fields"][0]["type"][1]
    assert value["name"] == "Value"
    value["fields"] = [{"name": n, "type": ty, "default": None} if isinstance(ty, list)
                       else {"name": n, "type": ty} for n, ty in fields]
    return schema


SCHEMA = envelope()
PARSED = parse_schema(SCHEMA)


def _decimal(scale: int, digits: int) -> st.SearchStrategy[Decimal]:
    bound = 10**digits - 1
    return st.integers(-bound, bound).map(lambda u: Decimal(u).scaleb(-scale))


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "id": st.integers(-(2**63), 2**63 - 1),
    "b": st.booleans(),
    "i": st.integers(-(2**31), 2**31 - 1),
    "l": st.integers(-(2**63), 2**63 - 1),
    "f": st.floats(width=32),
    "d": st.floats(),
    "s": st.text(),
    "by": st.binary(),
    "fx": st.binary(min_size=3, max_size=3),
    "dec": _decimal(4, 18),
    "wide": _decimal(3, 40),
    "dfx": _decimal(2, 18),
    "e": st.sampled_from(["RED", "GREEN", "BLUE"]),
    "arr": st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=5),
    "m": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4),
    "rec": st.fixed_dictionaries({"x": st.floats(), "y": st.none() | st.text(max_size=5),
                                  "z": st.lists(st.binary(max_size=4), max_size=3)}),
    "multi": st.none() | st.text(max_size=5) | st.integers(-(2**63), 2**63 - 1),
    "s2": st.text(),
    "fx2": st.binary(min_size=3, max_size=3),
}
NULLABLE = {n for n, ty in FIELDS if isinstance(ty, list) and ty[0] == "null"}
IMAGES = st.fixed_dictionaries({n: (st.none() | s) if n in NULLABLE else s
                                for n, s in VALUES.items()})
SOURCES = st.fixed_dictionaries({
    "version": st.text(max_size=5), "connector": st.just("postgresql"), "name": st.just("p"),
    "ts_ms": st.integers(0, 2**42), "snapshot": st.sampled_from(["true", "last", "false"]),
    "db": st.just("postgres"), "sequence": st.none() | st.text(max_size=5),
    "schema": st.just("s"), "table": st.just("t"), "txId": st.none() | st.integers(0, 2**32),
    "lsn": st.none() | st.integers(0, 2**63 - 1), "xmin": st.none() | st.integers(0, 2**32),
    "commit_lsn": st.integers(0, 2**63 - 1), "txn_index": st.integers(0, 2**31)})
EVENTS = st.fixed_dictionaries({
    "before": st.none() | IMAGES, "after": st.none() | IMAGES, "source": SOURCES,
    "op": st.sampled_from(["c", "u", "d", "r", "t", "x", ""]),
    "ts_ms": st.none() | st.integers(0, 2**42),
    "transaction": st.none() | st.fixed_dictionaries({
        "id": st.text(max_size=8), "total_order": st.integers(1, 2**40),
        "data_collection_order": st.integers(1, 2**40)}),
    "unchanged_toast": st.lists(st.sampled_from([n for n, _ in FIELDS]) | st.text(max_size=4),
                                max_size=3),
    "unparsed": st.none() | st.dictionaries(st.text(max_size=4), st.text(max_size=4),
                                            max_size=2)})


def write(event: dict[str, Any], parsed: Any = PARSED) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parsed, event)
    return out.getvalue()


def python_rows(records: list[tuple[int, bytes]], writers: dict[int, WriterSchema]
                ) -> TopicRows:
    out = TopicRows()
    _decode_python(records, writers, out)
    return out


def same(c: tuple[list[dict[str, Any]], int, int, set[str]], reference: TopicRows) -> None:
    """The C result is the reference's, to the types and keys' order (repr: Decimal exponents,
    bool against int, bytes against str, -0.0, nan)."""
    rows, truncates, deletes, toast = c
    assert repr(rows) == repr(reference.rows)
    assert [list(r) for r in rows] == [list(r) for r in reference.rows]
    assert (truncates, deletes, toast) == (reference.truncates, reference.deletes, reference.toast)


WRITER = WriterSchema.of(SCHEMA, False)


def test_the_extension_is_built() -> None:
    """CI builds the extension; a silently missing one would leave only the slow path."""
    if native_setting(os.environ) == "off":
        pytest.skip("PGCDC_NATIVE=off: the pure-Python path is asked for")
    assert native is not None, "connector._native is not built: run `make native`"
    assert WRITER.decoder is not None  # every type of FIELDS compiles


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(EVENTS, min_size=1, max_size=4))
@example(events=[{"before": None, "after": None, "source": {
    "version": "", "connector": "postgresql", "name": "p", "ts_ms": 0, "snapshot": "false",
    "db": "postgres", "sequence": None, "schema": "s", "table": "t", "txId": None,
    "lsn": None, "xmin": None, "commit_lsn": 0, "txn_index": 0}, "op": "t", "ts_ms": None,
    "transaction": None, "unchanged_toast": [], "unparsed": None}])
def test_random_events_decode_as_fastavro_decodes_them(events: list[dict[str, Any]]) -> None:
    records = [(1, write(e)) for e in events]
    got = row_program.decode(records, {1: WRITER.decoder})
    assert got is not None  # fastavro's own bytes: the C side declines none
    same(got, python_rows(records, {1: WRITER}))


# A few valid bodies to corrupt: every field null, every field set, a truncate.
_FULL = {"id": -1, "b": True, "i": -7, "l": 2**40, "f": 0.5, "d": -1e300, "s": "é€𝄞",
         "by": b"\x00\xff", "fx": b"abc", "dec": Decimal("-12.3400"),
         "wide": Decimal("-123456789012345678901234567890.123"), "dfx": Decimal("99.99"),
         "e": "BLUE", "arr": [1, None, -1], "m": {"k": "v", "": ""},
         "rec": {"x": 1.0, "y": "y", "z": [b"", b"z"]}, "multi": 5, "s2": "", "fx2": b"xyz"}
_SOURCE = {"version": "1.0", "connector": "postgresql", "name": "p", "ts_ms": 1, "snapshot":
           "false", "db": "postgres", "sequence": None, "schema": "s", "table": "t",
           "txId": 9, "lsn": 10, "xmin": None, "commit_lsn": 10, "txn_index": 2}
_NULLS = {n: None if n in NULLABLE else _FULL[n] for n in _FULL}
BODIES = [write({"before": _NULLS, "after": _FULL, "source": _SOURCE, "op": "u", "ts_ms": 5,
                 "transaction": {"id": "9:10", "total_order": 1, "data_collection_order": 1},
                 "unchanged_toast": ["s"], "unparsed": {"a": "b"}}),
          write({"before": None, "after": _NULLS, "source": _SOURCE, "op": "c",
                 "ts_ms": None, "transaction": None, "unchanged_toast": [], "unparsed": None}),
          write({"before": None, "after": None, "source": _SOURCE, "op": "t", "ts_ms": 1,
                 "transaction": None, "unchanged_toast": [], "unparsed": None})]


def _outcome(records: list[tuple[int, bytes]], writer: WriterSchema = WRITER) -> str:
    """repr of fastavro's rows, or the error it raises."""
    try:
        return repr(python_rows(records, {1: writer}).rows)
    except NotForRows:
        return "NotForRows"


@needs_native
@settings(max_examples=300, deadline=None)
@given(which=st.integers(0, len(BODIES) - 1), data=st.data())
def test_a_corrupt_body_gets_fastavros_rows_or_error(which: int, data: st.DataObject) -> None:
    """Bytes changed, cut or added anywhere: the C side gives fastavro's rows or declines, and
    decode_rows then gives fastavro's rows or its NotForRows."""
    good = BODIES[which]
    at = data.draw(st.integers(0, len(good)), label="at")
    kind = data.draw(st.sampled_from(["set", "cut", "insert", "append"]), label="kind")
    byte = data.draw(st.binary(min_size=1, max_size=3), label="bytes")
    if kind == "set":
        bad = good[:at] + byte + good[at + len(byte):]
    elif kind == "cut":
        bad = good[:at]
    elif kind == "insert":
        bad = good[:at] + byte + good[at:]
    else:
        bad = good + byte
    records = [(1, bad)]
    reference = _outcome(records)
    got = row_program.decode(records, {1: WRITER.decoder})
    if got is not None:
        assert repr(got[0]) == reference
    try:
        result = repr(decode_rows(records, {1: WRITER}).rows)
    except NotForRows:
        result = "NotForRows"
    assert result == reference


@needs_native
def test_every_prefix_of_a_body_is_declined() -> None:
    for good in BODIES:
        assert row_program.decode([(1, good)], {1: WRITER.decoder}) is not None
        for cut in range(len(good)):
            assert row_program.decode([(1, good[:cut])], {1: WRITER.decoder}) is None, cut
            with pytest.raises(NotForRows):
                decode_rows([(1, good[:cut])], {1: WRITER})


@needs_native
def test_what_fastavro_reads_leniently_is_left_to_it() -> None:
    """Bytes fastavro reads its own way -- trailing bytes (ignored), a boolean byte other than
    0/1 (true), a negative union index (Python's list index) -- are declined by the C side,
    so the rows are fastavro's."""
    schema = envelope([("id", "long"), ("b", "boolean"), ("u", ["null", "long"])])
    writer = WriterSchema.of(schema, False)
    parsed = parse_schema(schema)
    event = {"before": None, "after": {"id": 1, "b": True, "u": 3}, "source": _SOURCE,
             "op": "c", "ts_ms": None, "transaction": None, "unchanged_toast": [],
             "unparsed": None}
    good = write(event, parsed)
    # before null, after's record branch, id 1, b true, u's long branch, 3
    assert good[:6] == b"\x00\x02\x02\x01\x02\x06"
    odd = [good + b"\x00",  # trailing
           good[:3] + b"\x02" + good[4:],  # boolean 2
           good[:4] + b"\x01" + good[5:]]  # union index -1: Python's writer_schema[-1]
    for bad in odd:
        assert row_program.decode([(1, bad)], {1: writer.decoder}) is None
        batch = decode_rows([(1, bad)], {1: writer})
        assert repr(batch.rows) == repr(python_rows([(1, bad)], {1: writer}).rows)
    assert decode_rows([(1, odd[1])], {1: writer}).rows[0]["b"] is True


@needs_native
def test_a_decimal_beyond_its_precision_is_rounded_as_fastavro_does() -> None:
    """An unscaled value with more digits than the precision: fastavro rounds it to the
    precision (a Decimal with a positive exponent); so does the C side's helper."""
    schema = envelope([("id", "long"), ("n", {"type": "bytes", "logicalType": "decimal",
                                              "precision": 3, "scale": 2})])
    writer = WriterSchema.of(schema, False)
    raw = parse_schema(envelope([("id", "long"), ("n", "bytes")]))
    records = [(1, write({"before": None, "after": {"id": 1, "n": unscaled}, "source": _SOURCE,
                         "op": "c", "ts_ms": None, "transaction": None,
                         "unchanged_toast": [], "unparsed": None}, raw))
               for unscaled in (b"\x7f\xff", b"", b"\x80" + b"\x00" * 20, b"\x03\xe7")]
    got = row_program.decode(records, {1: writer.decoder})
    assert got is not None
    same(got, python_rows(records, {1: writer}))
    assert [str(r["n"]) for r in got[0]] == ["328", "0.00", "-1.87E+48", "9.99"]


@needs_native
def test_invalid_utf8_where_the_row_does_not_look_is_declined() -> None:
    """fastavro reads every string of the Envelope strictly, also those the row drops
    (source.version, ...): so does the C side."""
    good = BODIES[2]
    at = good.index(b"1.0")
    for bad_text in (b"\xff\xfe\xfd", b"\xed\xa0\x80", b"\xc0\xaf\x00"):
        bad = good[:at] + bad_text + good[at + 3:]
        assert row_program.decode([(1, bad)], {1: WRITER.decoder}) is None
        with pytest.raises(NotForRows):
            decode_rows([(1, bad)], {1: WRITER})


def test_schemas_left_to_fastavro() -> None:
    """The compile step refuses what the C side does not read: fastavro decodes those."""
    recursive = envelope([("id", "long"), ("self", ["null", "p.s.t.Value"])])
    assert row_program.program(parse_schema(recursive)) is None
    assert WriterSchema.of(recursive, False).decoder is None
    not_decimal = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "string", "logicalType": "decimal", "precision": 3}}]}
    assert row_program.program(parse_schema(not_decimal)) is None
    no_op = envelope()
    no_op["fields"] = [f for f in no_op["fields"] if f["name"] != "op"]
    assert row_program.row_decoder(parse_schema(no_op), {"id": "id"}, True) is None
    two_in_one = row_program.row_decoder(PARSED, {"id": "x", "s": "x"}, True)
    assert two_in_one is None
    assert row_program.program(parse_schema("long")) == ("long",)


@needs_native
def test_a_batch_with_a_schema_left_to_fastavro_is_decoded_by_fastavro() -> None:
    recursive = envelope([("id", "long"), ("self", ["null", "p.s.t.Value"])])
    writers = {1: WRITER, 2: WriterSchema.of(recursive, False)}
    other = write({"before": None, "after": {"id": 5, "self": {"id": 6, "self": None}},
                   "source": _SOURCE, "op": "c", "ts_ms": None, "transaction": None,
                   "unchanged_toast": [], "unparsed": None}, parse_schema(recursive))
    records = [(1, BODIES[0]), (2, other)]
    assert row_program.decode(records, {1: WRITER.decoder, 2: None}) is None
    batch = decode_rows(records, writers)
    assert repr(batch.rows) == repr(python_rows(records, writers).rows)
    assert batch.rows[1]["self"] == {"id": 6, "self": None}


@needs_native
def test_no_memory_is_leaked() -> None:
    """Decoding (and declining) again and again holds no more memory."""
    records = [(1, b) for b in BODIES] * 20
    bad = [(1, BODIES[0]), (1, BODIES[0][:-3])]

    def run() -> None:
        for _ in range(50):
            assert row_program.decode(records, {1: WRITER.decoder}) is not None
            assert row_program.decode(bad, {1: WRITER.decoder}) is None

    run()
    tracemalloc.start()
    try:
        run()
        before = tracemalloc.get_traced_memory()[0]
        run()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 50_000


@needs_native
@pytest.mark.parametrize("varint, decoded", [
    ("fefefefefefefefefe01", True), ("ffffffffffffffffff01", True),
    ("80808080808080808001", True), ("ffffffffffffffffff00", True), ("8100", True),
    ("ffffffffffffffff7f", True), ("ffffffffffffffffff7f", False),
    ("ffffffffffffffffffff01", False)])
def test_long_varints_at_the_edges_of_64_bits(varint: str, decoded: bool) -> None:
    """Ten-byte varints, over-long spellings (0x81 0x00 is -1) and beyond 64 bits (fastavro
    wraps them: the C side declines, so the rows are fastavro's)."""
    schema = envelope([("id", "long")])
    writer = WriterSchema.of(schema, False)
    good = write({"before": None, "after": {"id": 1}, "source": _SOURCE, "op": "c",
                  "ts_ms": None, "transaction": None, "unchanged_toast": [], "unparsed": None},
                 parse_schema(schema))
    assert good[:3] == b"\x00\x02\x02"  # before null, after's record branch, id 1
    records = [(1, good[:2] + bytes.fromhex(varint) + good[3:])]
    got = row_program.decode(records, {1: writer.decoder})
    if decoded:
        assert got is not None
        same(got, python_rows(records, {1: writer}))
    else:
        assert got is None
    assert repr(decode_rows(records, {1: writer}).rows) == _outcome(records, writer)
