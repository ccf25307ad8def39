"""`--history` options: patterns, tracked columns, what is refused (one clear line)."""

from __future__ import annotations

import pytest

from spark_jobs.rules.names import TableId
from spark_jobs.runtime.config import MergeConfig, parse_args
from spark_jobs.runtime.history_job import catalog_name

BASE = ["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r", "--topic-prefix",
        "p", "--target", "/lake"]


def test_patterns_match_postgresql_names() -> None:
    config = parse_args([*BASE, "--history", "public.*, sales.order_?", "--history-columns",
                         "tier,name"])
    assert config.history == ("public.*", "sales.order_?")
    assert config.history_columns == ("tier", "name")
    assert config.keeps_history(TableId("public", "users"))
    assert config.keeps_history(TableId("sales", "order_x"))
    assert not config.keeps_history(TableId("sales", "orders"))
    assert not parse_args(BASE).keeps_history(TableId("public", "users"))


@pytest.mark.parametrize("argv, message", [
    (["--history", "*", "--format", "parquet"], "--history applies to Delta tables"),
    (["--history-columns", "a"], "need --history"),
])
def test_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args([*BASE, *argv])
    assert message in capsys.readouterr().err


def test_refused_in_code() -> None:
    with pytest.raises(ValueError, match="not both"):
        MergeConfig("k", "r", "/lake", topic_prefix="p", history=("*",),
                    history_columns=("a",), history_except_columns=("b",))
    with pytest.raises(ValueError, match="hdfs:// paths"):
        MergeConfig("k", "r", "hdfs://nn/lake", topic_prefix="p", history=("*",))
    assert MergeConfig("k", "r", "s3a://b/lake", topic_prefix="p", history=("*",)).history


def test_catalog_name_cannot_be_a_tables_own() -> None:
    assert catalog_name("lake", TableId("public", "users")) == "`lake`.`public__users__history`"
