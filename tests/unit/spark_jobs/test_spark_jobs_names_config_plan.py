"""Pure parts of the merge job: topic names, column names, settings, the MERGE plan."""

from __future__ import annotations

import re

import pytest

from spark_jobs.rules.names import TableId, column_names, subscribe_pattern, table_of
from spark_jobs.rules.plan import DATAFUSION, merge_plan, newer_expr, not_deleted_later
from spark_jobs.runtime.config import OBJECT_STORE_IO_TABLES, MergeConfig, parse_args


def test_subscribe_pattern_matches_table_topics_only() -> None:
    pattern = re.compile(subscribe_pattern("pg.prod"))
    assert pattern.match("pg.prod.public.users")
    assert pattern.match("pg.prod.my-schema.order_items")
    for other in ["pg.prod.transaction", "pg.prod.message", "pg.prod.heartbeat",
                  "pg.prodX.public.users", "pgXprod.public.users", "pg.prod.a.b.c",
                  "other.public.users"]:
        assert not pattern.match(other), other


def test_table_of_topic() -> None:
    assert table_of("pg.prod.public.users") == TableId("public", "users")
    assert table_of("p.s.t").path == "s/t"
    with pytest.raises(ValueError):
        table_of("p.heartbeat")


def test_column_names_use_pg_name_when_delta_accepts_it() -> None:
    record = {"type": "record", "name": "Value", "fields": [
        {"name": "id", "type": "long", "pg_name": "id"},
        {"name": "order_x002did", "type": "long", "pg_name": "order-id"},
        {"name": "a_x0020b", "type": "long", "pg_name": "a b"},  # space: Delta refuses
        {"name": "Name", "type": "string", "pg_name": "Name"},
        {"name": "name_x0021", "type": "string", "pg_name": "NAME"},  # collides with Name
    ]}
    assert column_names(record) == {"id": "id", "order_x002did": "order-id",
                                    "a_x0020b": "a_x0020b", "Name": "Name",
                                    "name_x0021": "name_x0021"}


def test_config_from_args_and_defaults() -> None:
    c = parse_args(["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r",
                    "--topic-prefix", "pg", "--target", "/lake/", "--trigger", "available-now",
                    "--partition-by", "region, day", "--max-offsets-per-trigger", "1000",
                    "--kafka-option", "kafka.security.protocol=SSL"])
    # available-now uses no heartbeats but subscribes to them: one subscription per checkpoint
    assert c.subscription() == ("subscribePattern",
                                subscribe_pattern("pg") + r"|^pg\.heartbeat$")
    assert c.checkpoint_dir == "/lake/_pgcdc/checkpoint"
    assert c.dead_letter_dir == "/lake/_pgcdc/dead_letter"
    assert c.available_now and c.partition_by == ("region", "day")
    assert c.kafka_options == {"kafka.security.protocol": "SSL"}
    t = parse_args(["--bootstrap-servers", "k", "--schema-registry-url", "r", "--topics",
                    "pg.public.a,pg.public.b", "--target", "/t", "--trigger", "30s"])
    assert t.subscription() == ("subscribe", "pg.public.a,pg.public.b")
    assert t.interval == "30 seconds" and not t.available_now


@pytest.mark.parametrize("kw", [
    {"topic_prefix": "p", "topics": ("p.s.t",)},
    {},
    {"topic_prefix": "p", "format": "csv"},
    {"topic_prefix": "p", "trigger": "soon"},
    {"topics": ("p.heartbeat",)},
    {"topic_prefix": "p", "kafka_options": {"security.protocol": "SSL"}},
])
def test_config_rejects(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        MergeConfig("k", "r", "/t", **kw)  # type: ignore[arg-type]


def test_cli_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--bootstrap-servers", "k", "--schema-registry-url", "r",
                    "--topic-prefix", "p", "--target", "/t", "--trigger", "whenever"])
    assert exc.value.code == 2
    assert "--trigger must be" in capsys.readouterr().err


def test_merge_plan_guards_every_clause_by_position() -> None:
    plan = merge_plan(["id"], ["id", "name", "bio"], ["id", "name", "bio", "gone"], ["bio"])
    newer = newer_expr("s", "t")
    assert plan.on == "s.`id` <=> t.`id`"
    assert plan.delete_when == f"s.`_cdc_op` = 'd' AND {newer}"
    assert plan.update_when == f"s.`_cdc_op` <> 'd' AND {newer}"
    assert plan.insert_when == "s.`_cdc_op` <> 'd'"
    assert plan.update_set["`name`"] == "s.`name`"
    assert plan.update_set["`bio`"] == (
        "CASE WHEN array_contains(s.`_cdc_toast`, 'bio') THEN t.`bio` ELSE s.`bio` END")
    assert plan.update_set["`gone`"] == "NULL"  # dropped upstream
    assert "`id`" not in plan.update_set
    assert plan.update_set["`_cdc_commit_lsn`"] == "s.`_cdc_commit_lsn`"
    assert set(plan.insert_values) == {"`id`", "`name`", "`bio`", "`_cdc_op`",
                                       "`_cdc_commit_lsn`", "`_cdc_txn_index`", "`_cdc_ts_ms`"}


def test_the_same_plan_in_datafusion_sql_for_delta_rs() -> None:
    plan = merge_plan(["id", "n"], ["id", "n", "it's"], ["id", "n", "it's", "gone"], ["it's"],
                      DATAFUSION)
    assert plan.on == '(s."id" IS NOT DISTINCT FROM t."id") AND (s."n" IS NOT DISTINCT FROM t."n")'
    assert plan.delete_when == ("s.\"_cdc_op\" = 'd' AND (s.\"_cdc_commit_lsn\" > "
                                "t.\"_cdc_commit_lsn\" OR (s.\"_cdc_commit_lsn\" = "
                                "t.\"_cdc_commit_lsn\" AND s.\"_cdc_txn_index\" > "
                                "t.\"_cdc_txn_index\"))")
    assert plan.update_set['"it\'s"'] == ("CASE WHEN array_has(s.\"_cdc_toast\", 'it''s') "
                                          "THEN t.\"it's\" ELSE s.\"it's\" END")
    assert plan.update_set['"gone"'] == "NULL"


def test_tombstone_filter() -> None:
    assert not_deleted_later(["a", "b"]) == (
        f"s.`a` <=> t.`a` AND s.`b` <=> t.`b` AND NOT {newer_expr('s', 't')}")


def test_quoting_of_odd_column_names() -> None:
    plan = merge_plan(["we`ird"], ["we`ird", "it's"], ["we`ird", "it's"], ["it's"])
    assert plan.on == "s.`we``ird` <=> t.`we``ird`"
    assert "'it\\'s'" in plan.update_set["`it's`"]


def test_tables_written_at_once_follow_the_cores_unless_given() -> None:
    config = MergeConfig("k", "r", "/lake", topic_prefix="p")
    assert [config.tables_at_once(c) for c in (1, 2, 16, 200)] == [2, 2, 16, 16]
    given = MergeConfig("k", "r", "/lake", topic_prefix="p", parallel_tables=3)
    assert given.tables_at_once(16) == 3
    assert MergeConfig("k", "r", "/lake", topic_prefix="p", parallel_tables=40
                       ).tables_at_once(200) == 40  # given: as given


def test_fast_path_tables_at_once_follow_the_store_unless_given() -> None:
    """On an object store a table's part waits on requests, not on a core: many at once.
    On local disk, as many as the cores (as before)."""
    local = MergeConfig("k", "r", "/lake", topic_prefix="p")
    assert [local.io_tables_at_once(c) for c in (2, 16)] == [2, 16]
    for target in ("s3a://b/lake", "abfss://c@a.dfs.core.windows.net/lake", "gs://b/lake"):
        store = MergeConfig("k", "r", target, topic_prefix="p")
        assert store.io_tables_at_once(2) == OBJECT_STORE_IO_TABLES == 32
        assert store.tables_at_once(2) == 2  # the Spark path's stay by the cores
    assert MergeConfig("k", "r", "s3a://b/lake", topic_prefix="p", parallel_tables=48
                       ).io_tables_at_once(2) == 48  # never fewer than --parallel-tables
    given = MergeConfig("k", "r", "/lake", topic_prefix="p", io_tables=8)
    assert given.io_tables_at_once(2) == 8
    assert parse_args(["--bootstrap-servers", "k", "--schema-registry-url", "r",
                       "--topic-prefix", "p", "--target", "s3a://b/l", "--io-tables", "64"]
                      ).io_tables_at_once(2) == 64
    with pytest.raises(ValueError, match="--io-tables must be positive"):
        MergeConfig("k", "r", "/lake", topic_prefix="p", io_tables=-1)
