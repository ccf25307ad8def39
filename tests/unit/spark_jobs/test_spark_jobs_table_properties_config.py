"""`--table-property` and `--change-data-feed` of the merge job's command line."""

from __future__ import annotations

import pytest

from spark_jobs.runtime.config import parse_args

BASE = ["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r", "--topic-prefix",
        "shop", "--target", "/lake"]


def test_change_data_feed_and_repeated_table_properties() -> None:
    config = parse_args([*BASE, "--change-data-feed", "--table-property",
                         "delta.appendOnly=false", "--table-property",
                         "delta.logRetentionDuration=interval 7 days"])
    assert config.table_properties == {"delta.enableChangeDataFeed": "true",
                                       "delta.appendOnly": "false",
                                       "delta.logRetentionDuration": "interval 7 days"}


def test_no_properties_by_default() -> None:
    assert parse_args(BASE).table_properties == {}


def test_a_property_outside_delta_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args([*BASE, "--table-property", "enableChangeDataFeed=true"])
    assert exit_info.value.code == 2
    assert "must start with 'delta.'" in capsys.readouterr().err
