"""The merge job reads topics written with --value-format debezium to the same lake values as
pgcdc's own format (spark_jobs/events/debezium.py), except the losses schemas/README.md lists:
the same rows written both ways by the producer's codecs, decoded by the job's real path."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from connector.avro.debezium_types import (
    _bits,
    _hstore_json,
    _micro_duration,
    _unscaled_bytes,
    parse_hstore,
)
from connector.pgtypes.values import Interval
from spark_jobs.events import debezium
from spark_jobs.events.decode import decode_topic, plan_batch
from spark_jobs.events.rows import NotForRows, WriterSchema
from spark_jobs.events.wire import KEY_SCHEMA_ID, PROBLEM, SCHEMA_ID, with_frame
from tests.support.events import LocalRegistry, table_events
from tests.support.schemas import FixedSchemas

KAFKA_ROW = "topic string, partition int, offset long, key binary, value binary"
COLUMNS = [
    ("id", "int8"), ("d", "date"), ("t3", "time(3)"), ("t", "time"),
    ("ts3", "timestamp(3)"), ("ts", "timestamp"), ("tstz", "timestamptz"),
    ("ttz", "timetz"), ("iv", "interval"), ("b1", "bit(1)"), ("b5", "bit(5)"),
    ("vb", "varbit"), ("n", "numeric(10,2)"), ("nw", "numeric(50,3)"), ("nu", "numeric"),
    ("m", "money"), ("j", "jsonb"), ("u", "uuid"), ("x", "xml"), ("f", "float8"),
    ("tx", "text"), ("a", "int4[]"), ("au", "numeric[]"), ("ats", "timestamptz[]"),
    ("pt", "point"), ("pt2", "point"), ("tv", "tsvector"), ("geo", "geometry"),
    ("geog", "geography"), ("vec", "vector"), ("hv", "halfvec"), ("sv", "sparsevec"),
]
ROWS = [
    {"id": 1, "d": "2024-02-29", "t3": "12:34:56.789", "t": "23:59:59.999999",
     "ts3": "2024-01-02 03:04:05.123", "ts": "1969-12-31 23:59:59.000001",
     "tstz": "2024-01-02 03:04:05.5+00", "ttz": "12:00:00+00", "iv": "1 day 02:03:04.5",
     "b1": "1", "b5": "01011", "vb": "1101", "n": "-12345678.90",
     "nw": "12345678901234567890123456789012345678901234567.125", "nu": "-0.000123",
     "m": "$1,234.56", "j": '{"a": [1, 2]}', "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
     "x": "<a>1</a>", "f": "1.5", "tx": "é", "a": "{1,NULL,3}", "au": "{1.50,-2}",
     "ats": "{\"2000-01-01 00:00:00+00\",NULL}", "pt": "(1.5,-2)",
     "pt2": "(1e+20,0.1)", "tv": "'a':1 'cat':2A",
     "geo": "0101000020E6100000000000000000F03F0000000000000040",
     "geog": "0101000020E6100000000000000000F03F0000000000000040",
     "vec": "[1,2.5,-3e-05,1e+06]", "hv": "[0.099975586,1,-65504]",
     "sv": "{1:1.5,3:2,7:1e-07}/9"},
    {"id": 2, "d": "0001-01-01", "t3": "00:00:00", "t": "00:00:00",
     "ts3": "9999-12-31 23:59:59.999",
     "ts": "0001-01-01 00:00:00", "tstz": "1970-01-01 00:00:00+00", "ttz": "00:00:00.000001+00",
     "iv": "-00:00:01.25", "b1": "0", "b5": "00000", "vb": "", "n": "0.00",
     "nw": "-1.000", "nu": "123456789012345678901234567890123456789012345678901234567890",
     "m": "-$0.01", "j": "[]", "u": "00000000-0000-0000-0000-000000000000", "x": "",
     "f": "-0", "tx": "", "a": "{}", "au": "{}", "ats": "{}", "pt": "(-0,NaN)",
     "pt2": "(123456789012345,1e+15)", "tv": "", "geo": "010700000000000000",
     "vec": "[0.1]", "hv": "[0]", "sv": "{}/1"},
    {"id": 3},  # every column null
]
# Lossy by design (schemas/README.md): not compared here; their own tests below.
LOSSY = {"ttz", "iv", "vb", "m"}


def _lake_rows(spark: SparkSession, *value_formats: str) -> dict[int, dict[str, object]]:
    """ROWS written in `value_formats` in turn (one row each, round robin) to one topic, as
    the merge job reads them in one batch."""
    registry = LocalRegistry()
    tables = [table_events(registry, "p", "s", "t", COLUMNS, ["id"], value_format=f)
              for f in value_formats]
    values = [tables[i % len(tables)].change("c", 10 + i, 0, after=row)[1]
              for i, row in enumerate(ROWS)]
    df = spark.createDataFrame([("p.s.t", 0, i, None, v) for i, v in enumerate(values)],
                               KAFKA_ROW).selectExpr("*", "current_timestamp() AS timestamp")
    frames = with_frame(df)
    plans = plan_batch(frames.groupBy("topic", PROBLEM, SCHEMA_ID, KEY_SCHEMA_ID).count()
                       .withColumnRenamed("count", "n").collect(), FixedSchemas(registry.schemas))
    out = decode_topic(frames, "p.s.t", plans["p.s.t"]).collect()
    return {r["id"]: r.asDict() for r in out}


@pytest.fixture(scope="module")
def both(spark: SparkSession) -> tuple[dict[int, dict[str, object]], dict[int, dict[str, object]]]:
    return _lake_rows(spark, "pgcdc"), _lake_rows(spark, "debezium")


def test_every_type_decodes_to_the_default_formats_lake_value(both) -> None:  # type: ignore[no-untyped-def]
    pgcdc, dbz = both
    assert pgcdc.keys() == dbz.keys() == {1, 2, 3}
    for key in pgcdc:
        for name, _ in COLUMNS:
            if name in LOSSY:
                continue
            assert dbz[key][name] == pgcdc[key][name], (key, name)
    # the values themselves, not just their agreement
    assert dbz[1]["ts"] == dt.datetime(1969, 12, 31, 23, 59, 59, 1)
    assert dbz[1]["ts3"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123000)
    assert dbz[2]["d"] == dt.date(1, 1, 1) and dbz[1]["tstz"] is not None
    assert dbz[1]["nw"] == "12345678901234567890123456789012345678901234567.125"
    assert dbz[2]["nu"] == "123456789012345678901234567890123456789012345678901234567890"
    assert dbz[1]["b5"] == "01011" and dbz[1]["b1"] == "1" and dbz[1]["t3"] == 45_296_789_000
    assert dbz[1]["au"] == ["1.50", "-2"]
    assert (dbz[1]["pt"], dbz[1]["pt2"], dbz[2]["pt"]) == ("(1.5,-2)", "(1e+20,0.1)", "(-0,NaN)")
    assert dbz[1]["geo"] == "0101000020E6100000000000000000F03F0000000000000040"
    assert (dbz[1]["sv"], dbz[2]["sv"]) == ("{1:1.5,3:2,7:1e-07}/9", "{}/1")


def test_a_topic_switched_between_formats_reads_as_one(spark: SparkSession, both) -> None:  # type: ignore[no-untyped-def]
    """A producer switched to (or from) the Debezium format mid-topic: the batch holding
    events of both writes one lake table, the same as either format alone."""
    pgcdc, _ = both
    mixed = _lake_rows(spark, "debezium", "pgcdc")
    assert mixed.keys() == pgcdc.keys()
    for key in mixed:
        for name, _ in COLUMNS:
            if name not in LOSSY or key % 2 == 0:  # rows 1, 3 in Debezium's format
                assert mixed[key][name] == pgcdc[key][name], (key, name)


def test_the_documented_losses(both) -> None:  # type: ignore[no-untyped-def]
    pgcdc, dbz = both
    assert (pgcdc[1]["ttz"], dbz[1]["ttz"]) == ("12:00:00+00", "12:00:00Z")  # offset -> UTC
    assert (pgcdc[1]["iv"], dbz[1]["iv"]) == ("P1DT2H3M4.5S", "P1DT2H3M4.5S")
    assert (pgcdc[2]["iv"], dbz[2]["iv"]) == ("PT-1.25S", "PT-1.25S")
    assert (pgcdc[1]["vb"], dbz[1]["vb"]) == ("1101", "1101")  # leading zeros would be lost
    assert (pgcdc[1]["m"], dbz[1]["m"]) == ("1234.56", "1234.56")
    assert all(dbz[3][name] is None for name, _ in COLUMNS if name != "id")


def test_fast_path_leaves_debezium_topics_to_spark() -> None:
    registry = LocalRegistry()
    table = table_events(registry, "p", "s", "t", COLUMNS[:3], ["id"], value_format="debezium")
    with pytest.raises(NotForRows):
        WriterSchema.of(registry.schemas[table.value_id], False)


def test_one_line_when_truncates_are_not_written(caplog: pytest.LogCaptureFixture) -> None:
    registry = LocalRegistry()
    none = table_events(registry, "p", "s", "none", COLUMNS[:2], ["id"],
                        value_format="debezium", truncate_records="none")
    every = table_events(registry, "p", "s", "every", COLUMNS[:2], ["id"],
                         value_format="debezium", truncate_records="every-partition")
    plain = table_events(registry, "p", "s", "plain", COLUMNS[:2], ["id"])
    summary = [{"topic": t.topic, PROBLEM: None, SCHEMA_ID: t.value_id, KEY_SCHEMA_ID: None,
                "n": 1} for t in (none, every, plain)]
    with caplog.at_level(logging.WARNING, logger=debezium.__name__):
        plan_batch(summary, FixedSchemas(registry.schemas))
        plan_batch(summary, FixedSchemas(registry.schemas))  # the next batch: said once
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("p.s.none: ")
    assert "--truncate-records every-partition" in lines[0]


# ---------------------------------------------------------------------------- pure round trips


@given(st.integers(-(2**40), 2**40), st.integers(-(10**6), 10**6),
       st.integers(-(10**12), 10**12))
def test_interval_micros_round_trip_without_months(days_micros: int, days: int,
                                                   micros: int) -> None:
    interval = Interval(0, days, micros)
    total = _micro_duration(interval)
    assert total == days * 86_400_000_000 + micros
    text = debezium.duration_text(total)
    assert text is not None
    # the text names the same length of time (days counted as 24 hours)
    assert _iso_micros(text) == total


def _iso_micros(text: str) -> int:
    match = re.fullmatch(r"P(?:(-?\d+)D)?(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?[\d.]+)S)?)?", text)
    assert match, text
    d, h, m, s = (match.group(i) or "0" for i in range(1, 5))
    seconds = round(float(s) * 1_000_000) if "." in s else int(s) * 1_000_000
    return ((int(d) * 24 + int(h)) * 60 + int(m)) * 60_000_000 + seconds


def test_interval_months_are_30_4375_days() -> None:
    assert _micro_duration(Interval(12, 0, 0)) == 365 * 86_400_000_000 + 6 * 3_600_000_000
    with pytest.raises(ValueError, match="no Debezium MicroDuration"):
        _micro_duration(Interval(2**31 - 1, 2**31 - 1, 2**63 - 1))  # infinity


@given(st.text(alphabet="01", min_size=2, max_size=80))
def test_bits_round_trip(bits: str) -> None:
    data = _bits((len(bits) + 7) // 8, bits)
    assert debezium.bits_text(data, len(bits)) == bits
    varying = _bits(0, bits)  # bit varying: leading zeros are not carried
    assert debezium.bits_text(varying, 0) == bits.lstrip("0")


@given(st.integers(-(10**60), 10**60), st.integers(0, 40))
def test_unscaled_bytes_round_trip(unscaled: int, scale: int) -> None:
    data = _unscaled_bytes(unscaled)
    assert int.from_bytes(data, "big", signed=True) == unscaled
    assert len(data) == (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    text = debezium.decimal_text(data, scale)
    assert text is not None and text.replace("-", "").replace(".", "").lstrip("0") == \
        str(abs(unscaled)).lstrip("0")


@given(st.dictionaries(st.text(max_size=8), st.none() | st.text(max_size=8), max_size=5))
def test_hstore_round_trip(pairs: dict[str, str | None]) -> None:
    text = debezium.hstore_text(json.dumps(pairs))
    assert text is not None and parse_hstore(text) == pairs
    assert json.loads(_hstore_json(text)) == pairs  # the producer's side of the trip


# PostgreSQL's own text of these (SELECT x::float8 / x::float4 on PostgreSQL 15 and 18)
FLOAT8_TEXTS = [(1.5, "1.5"), (100.0, "100"), (1e15, "1e+15"),
                (123456789012345.0, "123456789012345"), (0.0001, "0.0001"), (0.00001, "1e-05"),
                (-2.5e-300, "-2.5e-300"), (1e20, "1e+20"), (0.1, "0.1"),
                (1 / 3, "0.3333333333333333"), (-0.0, "-0"), (0.0, "0"),
                (float("inf"), "Infinity"), (float("-inf"), "-Infinity"), (float("nan"), "NaN")]
FLOAT4_TEXTS = [(1e6, "1e+06"), (123456.0, "123456"), (0.1, "0.1"),
                (0.0999755859375, "0.099975586"), (1 / 3, "0.33333334"), (1e-5, "1e-05"),
                (65504.0, "65504"), (3.4e38, "3.4e+38")]


def test_floats_print_as_postgresql_prints_them() -> None:
    assert [(v, debezium.float8_text(v)) for v, _ in FLOAT8_TEXTS] == FLOAT8_TEXTS
    assert [(v, debezium.float4_text(v)) for v, _ in FLOAT4_TEXTS] == FLOAT4_TEXTS


@given(st.floats(allow_nan=False))
def test_float8_text_reads_back_exactly(value: float) -> None:
    text = debezium.float8_text(value)
    assert float(text.replace("Infinity", "inf")) == value
    assert re.fullmatch(r"-?(\d+(\.\d+)?|\d(\.\d+)?e[+-]\d\d+|Infinity)", text), text


@given(st.floats(allow_nan=False, width=32))
@example(3.4025001647762064e+38)  # its 4 shortest digits round past float4's maximum
def test_float4_text_reads_back_exactly(value: float) -> None:
    text = debezium.float4_text(value)
    back = float(text.replace("Infinity", "inf"))
    assert back == value or debezium.float4_text(back) == text
    assert len(text.lstrip("-").replace(".", "").split("e")[0].strip("0")) <= 9
