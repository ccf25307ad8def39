"""`--column-mapping` and `--database` (issue 15): a new table keeps its PostgreSQL column names
(spaces, punctuation, a backtick, non-ASCII, case) through inserts, updates and deletes, with
a key column holding a space and a partition column holding a dot; a table created before the
flag keeps its escaped names; every table is registered in the catalog; Spark and delta-rs read
the original names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import SparkSession

from spark_jobs.rules.names import catalog_table_name
from spark_jobs.runtime.config import parse_args
from spark_jobs.runtime.query import run_merge
from tests.support.merge import CdcPublisher, table_rows

pytestmark = pytest.mark.e2e

KEY, DATE, SIZE = "order id", "order date", "Größe"
DOTTED, TICK, CAMEL = "a.b", "we`ird", "CamelCase"
ODD = [(KEY, "int8"), (DATE, "text"), (SIZE, "int8"), (DOTTED, "text"), (TICK, "text"),
       (CAMEL, "text")]
DB = "pgcdc_lake"
# Issue 25: names the job uses itself; a settings table keyed by `key` is common.
OWN = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
       "_cdc_op", "_kafka_offset"]
OWN_LAKE = [*OWN[:-2], "_x005Fcdc_x005Fop", "_x005Fkafka_x005Foffset"]


def _row(n: int, size: int, dotted: str = "p") -> dict[str, Any]:
    return {KEY: n, DATE: f"2024-01-0{n}", SIZE: size, DOTTED: dotted, TICK: f"w{n}",
            CAMEL: f"C{n}"}


def _merge(spark: SparkSession, kafka: Any, registry: Any, prefix: str, target: Path,
           *flags: str) -> None:
    stats = run_merge(spark, parse_args([
        "--bootstrap-servers", kafka.bootstrap, "--schema-registry-url", registry.url,
        "--topic-prefix", prefix, "--target", str(target), "--trigger", "available-now",
        "--database", DB, *flags]))
    assert stats.dead_letters == 0 and not stats.failed_tables, stats.failed_tables


def test_column_mapping_keeps_postgres_names_and_tables_are_registered(
        spark: SparkSession, kafka, registry,  # type: ignore[no-untyped-def]
        prefix: str, tmp_path: Path) -> None:
    pub = CdcPublisher(kafka.bootstrap, registry.url, prefix)
    target = tmp_path / "lake"

    # Run 1, no flag: the legacy table gets the default names ("order date" escaped).
    legacy = pub.table("public", "legacy", [("id", "int8"), (DATE, "text")], ["id"])
    pub.change(legacy, "c", 100, 0, after={"id": 1, DATE: "d1"})
    settings = pub.table("public", "settings", [(c, "text") for c in OWN], ["key"])
    for n, k in enumerate(("a", "b")):
        pub.change(settings, "c", 100, 1 + n, after={c: f"{c}-{k}" if c != "key" else k
                                                     for c in OWN})
    pub.flush()
    _merge(spark, kafka, registry, prefix, target)

    # Run 2, --column-mapping: a new table with original names; the legacy table unchanged.
    odd = pub.table("public", "Order Items", ODD, [KEY])
    for n in (1, 2, 3):
        pub.change(odd, "c", 200, n, after=_row(n, 10 * n))
    pub.change(legacy, "u", 200, 9, after={"id": 1, DATE: "d2"})
    pub.flush()
    mapped = ["--column-mapping", "--partition-by", DOTTED]
    _merge(spark, kafka, registry, prefix, target, *mapped)

    # Run 3: updates and a delete go through the MERGE (and the tombstone table) by name.
    pub.change(odd, "u", 300, 0, after=_row(1, 11, "q"))
    pub.change(odd, "d", 300, 1, before=_row(2, 20))
    pub.change(odd, "u", 300, 2, after=_row(3, 33))
    pub.change(settings, "u", 300, 3, after={c: f"{c}-2" if c != "key" else "a" for c in OWN})
    pub.change(settings, "d", 300, 4, before={c: None if c != "key" else "b" for c in OWN})
    pub.flush()
    _merge(spark, kafka, registry, prefix, target, *mapped)

    path = f"{target}/public/Order_x0020Items"
    df = spark.read.format("delta").load(path)
    assert [c for c in df.columns if not c.startswith("_cdc_")] == [c for c, _ in ODD]
    expected = {1: _row(1, 11, "q"), 3: _row(3, 33)}
    assert table_rows(spark, path, KEY) == expected
    # A condition written by hand with the same quoting rule as the job's.
    assert df.where("`we``ird` = 'w3' AND `Größe` = 33").count() == 1
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail is not None
    assert detail["properties"]["delta.columnMapping.mode"] == "name"
    assert detail["partitionColumns"] == [DOTTED]
    tomb = spark.read.format("delta").load(f"{target}/_pgcdc/tombstones/public/Order_x0020Items")
    assert [r[KEY] for r in tomb.collect()] == [2]

    # delta-rs: its DataFusion reader maps the physical names (to_pyarrow_table() does not).
    table = DeltaTable(path)
    assert table.protocol().min_reader_version == 2
    arrow = pa.table(QueryBuilder().register("t", table).execute(
        f'SELECT * FROM t ORDER BY "{KEY}"').read_all())
    assert [{c: r[c] for c, _ in ODD} for r in arrow.to_pylist()] == [expected[1], expected[3]]

    # The legacy table: still without mapping, its escaped name, and the update merged.
    legacy_path = f"{target}/public/legacy"
    assert table_rows(spark, legacy_path, "id") == {1: {"id": 1, "order_x0020date": "d2"}}
    legacy_detail = spark.sql(f"DESCRIBE DETAIL delta.`{legacy_path}`").first()
    assert legacy_detail is not None
    assert "delta.columnMapping.mode" not in legacy_detail["properties"]

    # The settings table: every column landed (the job's metadata names escaped), merged.
    own = spark.read.format("delta").load(f"{target}/public/settings")
    assert own.columns == [*OWN_LAKE, "_cdc_op", "_cdc_commit_lsn", "_cdc_txn_index",
                           "_cdc_ts_ms"]
    assert [r.asDict() for r in own.select(*OWN_LAKE).collect()] == [
        {lake: f"{c}-2" if c != "key" else "a" for c, lake in zip(OWN, OWN_LAKE, strict=True)}]

    # --database: both tables answer by their catalog names.
    name = catalog_table_name("public", "Order Items")
    assert name == "public___x004frder_x0020_x0049tems"
    rows = spark.sql(f"SELECT `{KEY}`, `{SIZE}` FROM {DB}.`{name}` ORDER BY 1").collect()
    assert [tuple(r) for r in rows] == [(1, 11), (3, 33)]
    assert spark.sql(f"SELECT * FROM {DB}.public__legacy").count() == 1
