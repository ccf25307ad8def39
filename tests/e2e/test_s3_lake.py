"""delta-rs on S3 (moto): it commits with a conditional put (`If-None-Match: *`), which is what
makes two writers of one table safe without a locking provider (docs/object-storage.md).
The merge job on S3, Spark and delta-rs on the same tables, is tests/e2e/test_merge_object_store.py.
"""

from __future__ import annotations

import json

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from devstack.s3 import S3

from spark_jobs.lake.storage import delta_rs_options

pytestmark = pytest.mark.e2e


def test_delta_rs_commits_by_conditional_put(s3: S3, s3_bucket: str) -> None:
    env = s3.env()
    options = delta_rs_options(f"s3a://{s3_bucket}/t", {}, env)  # the AWS variables alone
    client = boto3.client("s3", endpoint_url=s3.endpoint,
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                          region_name=env["AWS_REGION"])
    for url in (f"s3a://{s3_bucket}/t", f"s3://{s3_bucket}/t"):  # Spark's scheme and its own
        write_deltalake(url, pa.table({"id": pa.array([len(url)], pa.int64()), "v": ["a"]}),
                        mode="append", storage_options=options)
    assert DeltaTable(f"s3a://{s3_bucket}/t", storage_options=options).version() == 1

    # A stale snapshot commits after version 2 was taken meanwhile (a commit planted there): a
    # blind PUT would overwrite it; a conditional put fails, and delta-rs commits version 3.
    stale = DeltaTable(f"s3a://{s3_bucket}/t", storage_options=options)
    planted_key = "t/_delta_log/00000000000000000002.json"
    planted = json.dumps({"commitInfo": {"timestamp": 1, "operation": "PLANTED"}}) + "\n"
    client.put_object(Bucket=s3_bucket, Key=planted_key, Body=planted.encode())
    write_deltalake(stale, pa.table({"id": pa.array([100], pa.int64()), "v": ["rs"]}),
                    mode="append")
    assert client.get_object(Bucket=s3_bucket, Key=planted_key)["Body"].read().decode() == planted
    table = DeltaTable(f"s3a://{s3_bucket}/t", storage_options=options)
    assert table.version() == 3
    assert sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == [
        len(f"s3://{s3_bucket}/t"), len(f"s3a://{s3_bucket}/t"), 100]
