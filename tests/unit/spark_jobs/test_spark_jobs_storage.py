"""delta-rs's storage options derived from the settings a Spark user gives once
(spark_jobs/lake/storage.py): Spark's `fs.s3a.*`, per-bucket overrides, the AWS variables."""

from __future__ import annotations

from spark_jobs.lake.storage import (
    delta_rs_options,
    is_local,
    local_path,
    object_store_defaults,
    scheme,
)
from spark_jobs.runtime.config import MergeConfig

ENV = {"AWS_ACCESS_KEY_ID": "env-id", "AWS_SECRET_ACCESS_KEY": "env-secret",
       "AWS_REGION": "eu-west-1", "HOME": "/root"}


def test_schemes_and_local_paths() -> None:
    assert [scheme(p) for p in ("/lake", "file:/lake", "file:///lake", "s3a://b/x",
                                "ABFSS://c@a.dfs.core.windows.net/x", "relative/x:y")] == [
        "file", "file", "file", "s3a", "abfss", "file"]
    assert is_local("file:///lake") and not is_local("gs://b/x")
    assert local_path("file:///lake/t") == "/lake/t" and local_path("/lake") == "/lake"


def test_local_paths_need_no_options() -> None:
    assert delta_rs_options("/lake/t", {"spark.hadoop.fs.s3a.endpoint": "x"}, ENV) == {}


def test_the_aws_variables_alone() -> None:
    env = {**ENV, "AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}
    assert delta_rs_options("s3a://lake/t", {}, env) == {
        "AWS_ACCESS_KEY_ID": "env-id", "AWS_SECRET_ACCESS_KEY": "env-secret",
        "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
        "AWS_ALLOW_HTTP": "true"}
    # on AWS itself: nothing to say, delta-rs finds instance / web-identity credentials
    assert delta_rs_options("s3a://lake/t", {}, {"HOME": "/root"}) == {}
    assert delta_rs_options("s3://lake/t", {}, {"AWS_DEFAULT_REGION": "us-west-2"}) == {
        "AWS_REGION": "us-west-2"}


def test_spark_settings_win_over_the_variables_and_buckets_over_both() -> None:
    conf = {"spark.hadoop.fs.s3a.endpoint": "store.local:9000",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.access.key": "spark-id",
            "spark.hadoop.fs.s3a.secret.key": "spark-secret",
            "spark.hadoop.fs.s3a.bucket.other.endpoint": "https://other.example",
            "spark.hadoop.fs.s3a.bucket.other.access.key": "other-id",
            "spark.app.name": "x"}
    assert delta_rs_options("s3a://lake/t", conf, ENV) == {
        "AWS_ACCESS_KEY_ID": "spark-id", "AWS_SECRET_ACCESS_KEY": "spark-secret",
        "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://store.local:9000",
        "AWS_ALLOW_HTTP": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}
    other = delta_rs_options("s3a://other/t", conf, {})
    assert other["AWS_ENDPOINT_URL"] == "https://other.example"
    assert other["AWS_ACCESS_KEY_ID"] == "other-id" and "AWS_ALLOW_HTTP" not in other
    assert other["AWS_REGION"] == "us-east-1"  # a custom endpoint needs some region
    # an endpoint without a scheme is https unless SSL is off
    https = delta_rs_options("s3a://b/t", {"spark.hadoop.fs.s3a.endpoint": "s3.example"}, {})
    assert https["AWS_ENDPOINT_URL"] == "https://s3.example"


def test_hadoop_configuration_keys_count_too() -> None:
    """As read from the running session's Hadoop configuration (`session_settings`)."""
    conf = {"fs.s3a.endpoint": "http://h:1", "fs.s3a.path.style.access": "false",
            "spark.hadoop.fs.s3a.endpoint": "http://ignored:2"}
    assert delta_rs_options("s3a://b/t", conf, {}) == {
        "AWS_ENDPOINT_URL": "http://h:1", "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true", "AWS_REGION": "us-east-1"}


def test_azure_account_key() -> None:
    conf = {"spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "a2V5"}
    assert delta_rs_options("abfss://c@acct.dfs.core.windows.net/lake/t", conf, {}) == {
        "azure_storage_account_name": "acct", "azure_storage_account_key": "a2V5"}
    assert delta_rs_options("abfss://c@other.dfs.core.windows.net/t", conf, {}) == {}


def test_object_store_targets_take_the_fast_path() -> None:
    def fast(target: str) -> bool:
        return MergeConfig("k", "r", target, topic_prefix="p").fast_merge_on
    assert fast("/lake") and fast("s3a://b/lake") and fast("gs://b/lake")
    assert not fast("hdfs://nn/lake")
    assert not MergeConfig("k", "r", "s3a://b/l", topic_prefix="p", fast_merge="off"
                           ).fast_merge_on



def test_spark_writes_to_s3a_are_tuned_unless_the_user_chose() -> None:
    tuned = ({"fs.s3a.performance.flags": "create,mkdir"},
             {"spark.databricks.delta.writeChecksumFile.enabled": "false"})
    assert object_store_defaults("s3a://lake/t", {}) == tuned
    assert object_store_defaults("/lake", {}) == ({}, {})
    assert object_store_defaults("abfss://c@a.dfs.core.windows.net/x", {}) == ({}, {})
    # the user's own choice, as --conf spark.hadoop.*, in core-site.xml, or for Delta, wins
    for given in ({"spark.hadoop.fs.s3a.performance.flags": ""},
                  {"fs.s3a.performance.flags": "create"}):
        assert object_store_defaults("s3a://lake/t", given) == ({}, tuned[1])
    assert object_store_defaults("s3a://lake/t", {
        "spark.databricks.delta.writeChecksumFile.enabled": "true"}) == (tuned[0], {})
