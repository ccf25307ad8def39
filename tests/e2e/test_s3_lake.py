"""A Delta lake on S3 (moto): Spark through S3A and delta-rs on one table, and a streaming
checkpoint in the bucket.

Spark creates, appends to and MERGEs into `s3a://<bucket>/t`; a foreachBatch query (the merge
job's shape) runs two micro-batches with its checkpoint in the bucket; delta-rs reads the table
(by `s3://` and by `s3a://`) and commits to it with a stale snapshot over a commit planted at the
version it tries first, which only a conditional put (`If-None-Match: *`) keeps; Spark reads what
delta-rs wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from devstack.s3 import S3

pytestmark = pytest.mark.e2e


@pytest.fixture
def s3a_spark(spark: Any, s3: S3) -> Iterator[Any]:
    """The shared session, its S3A filesystem pointed at the test server.

    Set on the running session's Hadoop configuration (every filesystem instance created after
    reads it; each test's bucket is new, so its S3A instance is too); harmless to local paths."""
    env = s3.env()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in {
        "fs.s3a.endpoint": s3.endpoint,
        "fs.s3a.endpoint.region": env["AWS_REGION"],
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": env["AWS_ACCESS_KEY_ID"],
        "fs.s3a.secret.key": env["AWS_SECRET_ACCESS_KEY"],
    }.items():
        hadoop.set(key, value)
    yield spark


def delta_rs_options(s3: S3) -> dict[str, str]:
    """What delta-rs needs for moto: nothing about locking (it commits by conditional put)."""
    env = s3.env()
    return {
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": env["AWS_REGION"],
        "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
    }


def rows(df: Any) -> list[tuple[int, str]]:
    return sorted((r["id"], r["v"]) for r in df.collect())


def test_spark_and_delta_rs_share_a_delta_table_on_s3(s3a_spark: Any, s3: S3,
                                                      s3_bucket: str) -> None:
    from delta.tables import DeltaTable as SparkDeltaTable

    spark = s3a_spark
    table = f"s3a://{s3_bucket}/t"
    client = boto3.client("s3", endpoint_url=s3.endpoint, **{
        "aws_access_key_id": s3.env()["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": s3.env()["AWS_SECRET_ACCESS_KEY"],
        "region_name": s3.env()["AWS_REGION"]})

    def batch(ids: range, v: str) -> Any:
        return spark.range(ids.start, ids.stop).selectExpr("id", f"'{v}' AS v")

    # Spark: create (version 0), append (1), MERGE (2).
    batch(range(0, 4), "a").write.format("delta").save(table)
    batch(range(4, 6), "b").write.format("delta").mode("append").save(table)
    (SparkDeltaTable.forPath(spark, table).alias("t")
     .merge(batch(range(5, 8), "m").alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    expected = [(0, "a"), (1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "m"), (6, "m"), (7, "m")]
    assert rows(spark.read.format("delta").load(table)) == expected

    # Structured Streaming, checkpoint in the bucket: two micro-batches MERGE into the table.
    source, checkpoint = f"s3a://{s3_bucket}/source", f"s3a://{s3_bucket}/checkpoint"

    def merge_batch(df: Any, _batch_id: int) -> None:
        (SparkDeltaTable.forPath(spark, table).alias("t").merge(df.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    def run_available() -> None:
        query = (spark.readStream.format("delta").load(source).writeStream
                 .foreachBatch(merge_batch).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None

    batch(range(7, 9), "s1").write.format("delta").save(source)
    run_available()
    batch(range(0, 1), "s2").write.format("delta").mode("append").save(source)
    run_available()
    keys = {o["Key"] for o in client.list_objects_v2(
        Bucket=s3_bucket, Prefix="checkpoint/")["Contents"]}
    assert {"checkpoint/offsets/0", "checkpoint/offsets/1",
            "checkpoint/commits/0", "checkpoint/commits/1"} <= keys
    assert not any(k.endswith(".tmp") for k in keys)  # write-then-rename completed
    expected = [(0, "s2"), *expected[1:7], (7, "s1"), (8, "s1")]
    assert rows(spark.read.format("delta").load(table)) == expected
    spark_version = SparkDeltaTable.forPath(spark, table).history(1).collect()[0]["version"]
    assert spark_version == 4  # create, append, MERGE, two streamed MERGEs

    # delta-rs reads what Spark wrote, by its own scheme and by Spark's.
    options = delta_rs_options(s3)
    for url in (f"s3://{s3_bucket}/t", table):
        dt = DeltaTable(url, storage_options=options)
        assert dt.version() == spark_version
        got = dt.to_pyarrow_table().to_pylist()
        assert sorted((r["id"], r["v"]) for r in got) == expected

    # delta-rs commits with a stale snapshot: version 5 is taken meanwhile (a commit planted
    # there); a blind PUT would overwrite it, a conditional put fails and delta-rs retries at 6.
    stale = DeltaTable(f"s3://{s3_bucket}/t", storage_options=options)
    planted_key = f"t/_delta_log/{spark_version + 1:020d}.json"
    planted = json.dumps({"commitInfo": {"timestamp": 1, "operation": "PLANTED"}}) + "\n"
    client.put_object(Bucket=s3_bucket, Key=planted_key, Body=planted.encode())
    write_deltalake(stale, pa.table({"id": pa.array([100], pa.int64()), "v": ["rs"]}),
                    mode="append")
    assert client.get_object(Bucket=s3_bucket, Key=planted_key)["Body"].read().decode() == planted
    assert DeltaTable(table, storage_options=options).version() == spark_version + 2

    # Spark reads delta-rs's commit.
    assert rows(spark.read.format("delta").load(table)) == [*expected, (100, "rs")]
