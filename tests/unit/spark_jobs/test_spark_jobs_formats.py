"""The lake format registry (spark_jobs/sinks/__init__.py): a format is one module with
`open_sink(settings) -> TableSink` plus one registry line. A toy format registered here is
accepted by the job's configuration and opened by the job's sink factory; the options that
need a feature it lacks are refused by naming the formats that have it. No Spark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from spark_jobs.rules.names import TableId
from spark_jobs.runtime.config import MergeConfig, parse_args
from spark_jobs.runtime.job import open_table_sink
from spark_jobs.sinks import FORMATS, LakeFormat
from spark_jobs.sinks.delta import DeltaMirror
from spark_jobs.sinks.table_sink import BatchFacts, TableSettings, TableSink

BASE = ["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r",
        "--target", "/lake", "--topic-prefix", "p"]
OPENED: list[ToySink] = []


class ToySink:
    """A change log that remembers what it was given (the toy format's TableSink)."""

    mirror = None

    def __init__(self, settings: TableSettings) -> None:
        self.settings = settings
        self.applied: list[tuple[Any, int]] = []

    @property
    def path(self) -> str:
        return self.settings.path

    def original_names(self, spark: Any) -> bool:
        return False

    def apply(self, spark: Any, changes: Any, facts: BatchFacts,
              key: Sequence[str] | None, batch_id: int, part: str = "") -> None:
        self.applied.append((changes, batch_id))


def open_sink(settings: TableSettings) -> TableSink:
    """The toy format's factory: this module is the format's module."""
    OPENED.append(ToySink(settings))
    return OPENED[-1]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    # The one registry line of the toy format.
    monkeypatch.setitem(FORMATS, "toy", LakeFormat("Toy", __name__))


def test_a_registered_format_is_accepted_and_opened_by_the_job(toy: None) -> None:
    config = parse_args([*BASE, "--format", "toy", "--partition-by", "region"])
    assert config.format == "toy"
    sink = open_table_sink(config, "app-1", TableId("public", "orders"))
    assert isinstance(sink, ToySink) and OPENED[-1] is sink
    assert sink.path == "/lake/public/orders"
    assert sink.settings == TableSettings("/lake", "public/orders", "app-1", ("region",))
    # it supports nothing beyond writing batches: a change log, as parquet
    assert config.expiry_off == "--format toy keeps no tombstones"
    assert not config.fast_merge_on


@pytest.mark.parametrize("extra, message", [
    (["--history", "*"], "--history applies to Delta tables, not to --format toy"),
    (["--column-mapping"], "apply to Delta tables, not to --format toy"),
    (["--database", "lake"], "apply to Delta tables, not to --format toy"),
    (["--consistent-cuts", "--trigger", "10s"], "--consistent-cuts records Delta versions"),
])
def test_options_a_format_lacks_are_refused(toy: None, extra: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args([*BASE, "--format", "toy", *extra])
    assert message in capsys.readouterr().err
    parse_args([*BASE, *extra])  # delta has them all


def test_an_unregistered_format_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(ValueError, match="--format must be one of delta, parquet, not 'toy'"):
        MergeConfig("k:9092", "http://r", "/lake", topic_prefix="p", format="toy")


def test_delta_opens_a_mirror_with_both_engines_over_one_state() -> None:
    config = parse_args([*BASE, "--database", "lake"])
    sink = open_table_sink(config, "app-1", TableId("public", "orders"))
    mirror = sink.mirror
    assert isinstance(mirror, DeltaMirror) and mirror is sink
    # what one engine learns, the other knows
    assert mirror.fast.state is mirror.spark_writer.state is mirror.state
    assert mirror.state.catalog_name == "`lake`.`public__orders`"
    assert parse_args([*BASE, "--format", "parquet"]).lake_format.open_sink(
        TableSettings("/lake", "public/orders", "a")).mirror is None
