"""`--oversized-events omit` (connector/avro/oversized.py): the pure policy of which columns to
null, and the hook re-encoding a Confluent-framed event with them null."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer

from connector.avro import decode, frame
from connector.avro.oversized import OMITTED_HEADER, OmitOversized, columns_to_omit, event_limit
from connector.cli import build_parser
from connector.config import load
from connector.errors import ConfigError
from connector.tools.run import config_from_args


def test_largest_first_as_few_as_needed() -> None:
    sizes = [("a", 500), ("b", 3000), ("before.b", 2000), ("c", 10)]
    assert columns_to_omit(sizes, 0) == []
    assert columns_to_omit(sizes, 100) == ["b"]
    assert columns_to_omit(sizes, 2999) == ["b"]
    assert columns_to_omit(sizes, 3000) == ["b", "before.b"]
    assert columns_to_omit(sizes, 5400) == ["b", "before.b", "a"]


def test_not_enough_is_none() -> None:
    assert columns_to_omit([("a", 500), ("b", 1)], 600) is None
    assert columns_to_omit([], 1) is None


def test_limit_defaults_to_the_producer_setting() -> None:
    assert event_limit(0, {}) == 1_000_000
    assert event_limit(0, {"message.max.bytes": "200000"}) == 200_000
    assert event_limit(5000, {"message.max.bytes": "200000"}) == 5000


ROW: dict[str, Any] = {"type": "record", "name": "Value", "namespace": "p.public.t", "fields": [
    {"name": "id", "type": ["null", "int"]}, {"name": "small", "type": ["null", "string"]},
    {"name": "big", "type": ["null", "string"]}, {"name": "doc", "type": ["null", "bytes"]}]}
ENVELOPE: dict[str, Any] = {"type": "record", "name": "Envelope", "namespace": "p.public.t",
                            "fields": [
    {"name": "before", "type": ["null", ROW]}, {"name": "after", "type": ["null", "Value"]},
    {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
        {"name": "schema", "type": "string"}, {"name": "table", "type": "string"}]}},
    {"name": "op", "type": "string"},
    {"name": "ts_ms", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]}]}
KEY: dict[str, Any] = {"type": "record", "name": "Key", "namespace": "p.public.t",
                       "fields": [{"name": "id", "type": ["null", "int"]}]}
SCHEMAS = {1: KEY, 2: ENVELOPE}


def _framed(schema_id: int, datum: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(SCHEMAS[schema_id]), datum)
    return frame(schema_id, buf.getvalue())


def _event(before: dict[str, Any] | None, after: dict[str, Any] | None) -> bytes:
    return _framed(2, {"before": before, "after": after, "op": "u", "ts_ms": 5,
                       "source": {"schema": "public", "table": "t"}})


def test_update_with_a_large_column_in_both_rows() -> None:
    row = {"id": 7, "small": "s" * 100, "big": "b" * 50_000, "doc": b"d" * 20_000}
    key = _framed(1, {"id": 7})
    value = _event(row, dict(row, big="c" * 50_000))
    omit = OmitOversized(SCHEMAS.__getitem__, 45_000)
    result = omit("p.public.t", key, value)
    assert result is not None
    new_value, headers = result
    assert headers == [(OMITTED_HEADER, b"big,before.big")]
    assert len(key) + len(new_value) + len(OMITTED_HEADER) + len(headers[0][1]) <= 45_000
    event = decode(new_value, SCHEMAS.__getitem__).value
    assert event["after"] == {"id": 7, "small": "s" * 100, "big": None, "doc": b"d" * 20_000}
    assert event["before"]["big"] is None and event["before"]["doc"] == b"d" * 20_000
    assert event["op"] == "u" and event["source"] == {"schema": "public", "table": "t"}
    assert event["ts_ms"].year == 1970  # everything else as it was


def test_the_key_column_is_never_omitted() -> None:
    key = _framed(1, {"id": 1})
    value = _event(None, {"id": 1, "small": None, "big": "x" * 10_000, "doc": None})
    assert OmitOversized(SCHEMAS.__getitem__, 100)("p.public.t", key, value) is not None
    # nothing but the key left, still too large: produced as it is (and fails as by default)
    assert OmitOversized(SCHEMAS.__getitem__, 20)("p.public.t", key, value) is None


def test_a_record_that_fits_or_is_not_an_event_is_left_alone() -> None:
    value = _event(None, {"id": 1, "small": "x", "big": None, "doc": None})
    assert OmitOversized(SCHEMAS.__getitem__, 10_000)("p.public.t", None, value) is None
    assert OmitOversized(SCHEMAS.__getitem__, 1)("p.public.t", None, b"not avro") is None


@pytest.mark.parametrize("limit", [9_000, 25_000])
def test_keyless_table_omits_any_column(limit: int) -> None:
    value = _event(None, {"id": 1, "small": "x", "big": "y" * 20_000, "doc": b"z" * 10_000})
    result = OmitOversized(SCHEMAS.__getitem__, limit)("p.public.t", None, value)
    assert result is not None
    expected = b"big" if limit == 25_000 else b"big,doc"
    assert result[1] == [(OMITTED_HEADER, expected)]


def test_settings_default_to_fail_and_come_from_flags_and_yaml(tmp_path: Path) -> None:
    required = ["--dsn", "host=db", "--bootstrap-servers", "k:9092",
                "--schema-registry-url", "http://r"]
    cfg = config_from_args(build_parser().parse_args(["run", *required]))
    assert (cfg.oversized_events, cfg.max_event_bytes) == ("fail", 0)
    cfg = config_from_args(build_parser().parse_args([
        "run", *required, "--oversized-events", "omit", "--max-event-bytes", "5000000"]))
    assert (cfg.oversized_events, cfg.max_event_bytes) == ("omit", 5_000_000)
    config = tmp_path / "pgcdc.yaml"
    config.write_text("oversized-events: omit\nmax_event_bytes: 2000000\n")
    cfg = load(str(config), {"dsn": "host=db", "bootstrap_servers": "k:9092",
                             "schema_registry_url": "http://r"}, environ={})
    assert (cfg.oversized_events, cfg.max_event_bytes) == ("omit", 2_000_000)
    with pytest.raises(ConfigError, match="oversized_events must be one of fail, omit"):
        load(None, {"dsn": "host=db", "bootstrap_servers": "k:9092",
                    "schema_registry_url": "http://r", "oversized_events": "drop"}, environ={})
