"""Where the lake lives, and how delta-rs reaches it. Pure but for `configure`/`options_for`.

The merge job writes a table through two engines: Spark's Delta (through Hadoop's
filesystems: `s3a://`, `abfss://`, `gs://`, local paths) and delta-rs (the fast path,
history tables, the cuts manifest, tombstone expiry). A user gives the store **once**, the
way Spark users give it: Spark's `spark.hadoop.fs.s3a.*` settings (`--conf`, or
`spark-defaults.conf`) and/or the standard AWS variables (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`). delta-rs's
storage options are derived from those here (`delta_rs_options`); nobody sets a
delta-rs-only variable. What neither names (instance profiles, web-identity tokens,
`~/.aws`) delta-rs finds by itself, as the AWS SDK in Spark does.

Precedence for S3, per setting: a per-bucket Spark setting (`fs.s3a.bucket.<b>.<name>`), the
Spark setting (`fs.s3a.<name>`), the AWS variable. Spark's S3A endpoint may be given without
a scheme (`host:9000`): it is `https` unless `fs.s3a.connection.ssl.enabled` is false, and a
plain-`http` endpoint allows plain HTTP in delta-rs too. `fs.s3a.path.style.access=true` is
path-style requests (delta-rs's default with a custom endpoint; virtual-hosted otherwise).

Azure (`abfss://container@account.dfs.core.windows.net/...`): the account key from
`fs.azure.account.key.<account>.dfs.core.windows.net`, else delta-rs's own `AZURE_*`
variables. Google (`gs://`): `GOOGLE_APPLICATION_CREDENTIALS`, read by both engines.

delta-rs commits to S3 with a conditional put (`If-None-Match: *`), so two delta-rs writers
cannot both win a version; no locking provider is needed (S3, and S3-compatible stores
that honour conditional writes).

Spark's path on S3A, tuned (`object_store_defaults`, each only where the user set nothing):
S3A emulates a filesystem with extra requests, and Delta's Spark writer pays them per table
and batch (benchmarks/results/merge-s3.md counts ~200 requests per table for a MERGE).
`fs.s3a.performance.flags=create,mkdir` drops the probes for an existing file or a parent
that is a file before each create and mkdir: the lake's layout has neither, Delta's S3 log
store checks the commit file's absence itself, and the writer lease (lease.py) keeps out a
second writer. Delta's optional version checksum files (`.crc`, written by a rename, which
S3A emulates by copy, delete and listings) are not written: the protocol makes them
optional, and delta-rs does not read them. Both together cut a MERGE's requests by ~40%."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL = "file"
S3_SCHEMES = ("s3a", "s3", "s3n")
# What delta-rs reaches (HDFS and other Hadoop filesystems: Spark only)
DELTA_RS_SCHEMES = (LOCAL, *S3_SCHEMES, "abfss", "abfs", "az", "gs")
# Object stores delta-rs reaches: each request a round trip (tens of ms), not a disk access
OBJECT_STORE_SCHEMES = tuple(s for s in DELTA_RS_SCHEMES if s != LOCAL)
# Spark setting (after `fs.s3a.`) -> delta-rs storage option
_S3_SETTINGS = {
    "access.key": "AWS_ACCESS_KEY_ID",
    "secret.key": "AWS_SECRET_ACCESS_KEY",
    "session.token": "AWS_SESSION_TOKEN",
    "endpoint.region": "AWS_REGION",
}
_S3_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
           "AWS_ENDPOINT_URL")
_HADOOP = "spark.hadoop."

_conf: dict[str, str] = {}  # this process's Spark settings (`configure`)


def scheme(path: str) -> str:
    """`s3a` of `s3a://bucket/x`; `file` of a local path (with or without `file:`)."""
    head, sep, _ = path.partition("://")
    if sep and "/" not in head:
        return head.lower()
    return LOCAL


def is_local(path: str) -> bool:
    return scheme(path) == LOCAL


def local_path(path: str) -> str:
    """A local target as an OS path (`file:///x` -> `/x`)."""
    return path.removeprefix("file://").removeprefix("file:")


def _bucket(path: str) -> str:
    return path.partition("://")[2].partition("/")[0]


def hadoop_settings(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """The Hadoop settings of Spark settings: `spark.hadoop.fs.x` -> `fs.x` (what Spark puts
    into Hadoop's configuration), and any `fs.x` given as such (read from the Hadoop
    configuration: it wins, being what Spark's filesystems use)."""
    out = {k[len(_HADOOP):]: v for k, v in spark_conf.items() if k.startswith(_HADOOP)}
    out.update({k: v for k, v in spark_conf.items() if k.startswith("fs.")})
    return out


def _s3_options(bucket: str, hadoop: Mapping[str, str], env: Mapping[str, str]
                ) -> dict[str, str]:
    def setting(name: str) -> str | None:
        for key in (f"fs.s3a.bucket.{bucket}.{name}", f"fs.s3a.{name}"):
            value = hadoop.get(key, "").strip()
            if value:
                return value
        return None

    out = {k: env[k] for k in _S3_ENV if env.get(k)}
    for name, option in _S3_SETTINGS.items():
        value = setting(name)
        if value:
            out[option] = value
    if "AWS_REGION" not in out and env.get("AWS_DEFAULT_REGION"):
        out["AWS_REGION"] = env["AWS_DEFAULT_REGION"]
    endpoint = setting("endpoint")
    if endpoint:
        if "://" not in endpoint:
            ssl = (setting("connection.ssl.enabled") or "true").lower() != "false"
            endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
        out["AWS_ENDPOINT_URL"] = endpoint
    if out.get("AWS_ENDPOINT_URL", "").lower().startswith("http://"):
        out["AWS_ALLOW_HTTP"] = "true"
    path_style = setting("path.style.access")
    if path_style is not None:
        out["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = (
            "false" if path_style.lower() == "true" else "true")
    if "AWS_ENDPOINT_URL" in out and "AWS_REGION" not in out:
        out["AWS_REGION"] = "us-east-1"  # S3-compatible stores ignore it; the SDK wants one
    return out


def _azure_options(path: str, hadoop: Mapping[str, str]) -> dict[str, str]:
    # abfss://container@account.dfs.core.windows.net/path
    host = _bucket(path).partition("@")[2]
    key = hadoop.get(f"fs.azure.account.key.{host}", "").strip()
    if not key:
        return {}
    return {"azure_storage_account_name": host.partition(".")[0],
            "azure_storage_account_key": key}


def delta_rs_options(path: str, spark_conf: Mapping[str, str], env: Mapping[str, str]
                     ) -> dict[str, str]:
    """delta-rs's storage options for `path`, derived from Spark's settings and the
    environment (see the module doc); empty for a local path or when nothing is given."""
    kind = scheme(path)
    hadoop = hadoop_settings(spark_conf)
    if kind in S3_SCHEMES:
        return _s3_options(_bucket(path), hadoop, env)
    if kind in ("abfss", "abfs"):
        return _azure_options(path, hadoop)
    return {}


# Spark's path on an object store: Hadoop setting (after `spark.hadoop.`) or Spark setting →
# the value the job sets when the user set none (module docstring).
OBJECT_STORE_HADOOP = {"fs.s3a.performance.flags": "create,mkdir"}
OBJECT_STORE_SPARK = {"spark.databricks.delta.writeChecksumFile.enabled": "false"}


def object_store_defaults(target: str, settings: Mapping[str, str]
                          ) -> tuple[dict[str, str], dict[str, str]]:
    """(Hadoop, Spark) settings to set for a lake at `target`, given the session's
    `settings` (`session_settings`): the tuning above for an `s3a://` lake, minus whatever
    the user set (as `spark.hadoop.<name>`, a Hadoop `<name>` or the Spark setting)."""
    if scheme(target) not in S3_SCHEMES:
        return {}, {}
    hadoop = {k: v for k, v in OBJECT_STORE_HADOOP.items()
              if k not in settings and f"{_HADOOP}{k}" not in settings}
    spark = {k: v for k, v in OBJECT_STORE_SPARK.items() if k not in settings}
    return hadoop, spark


def configure(spark_conf: Mapping[str, str]) -> None:
    """Remember this process's Spark settings (the job calls it once, with its session's)."""
    _conf.clear()
    _conf.update(spark_conf)


def session_settings(spark: SparkSession) -> dict[str, str]:
    """The store settings Spark's filesystems use in this session: its Spark settings and
    the Hadoop configuration's `fs.s3a.*` and Azure account keys (set by `spark.hadoop.*`,
    `core-site.xml` or on the running session), with Hadoop's defaults."""
    out = dict(spark.sparkContext.getConf().getAll())
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001 - no public handle
    for prefix in ("fs.s3a.", "fs.azure.account.key."):
        props = hadoop.getPropsWithPrefix(prefix)
        out.update({f"{prefix}{k}": str(props.get(k)) for k in props.keySet().toArray()})
    return out


def options_for(path: str) -> dict[str, str]:
    """`delta_rs_options` of `path` with this process's settings and environment."""
    if is_local(path):
        return {}
    return delta_rs_options(path, _conf, os.environ)


def pyarrow_filesystem(path: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path within it) for reading plain files of the lake (the Spark
    checkpoint, dead letters) outside Spark, with the settings delta-rs gets (`options_for`):
    local paths and S3; other stores through pyarrow's own URI handling."""
    from pyarrow import fs

    if is_local(path):
        return fs.LocalFileSystem(), local_path(path).rstrip("/")
    inside = path.partition("://")[2].rstrip("/")
    if scheme(path) not in S3_SCHEMES:
        return fs.FileSystem.from_uri(path)[0], inside
    options = options_for(path)
    endpoint = options.get("AWS_ENDPOINT_URL", "")
    s3 = fs.S3FileSystem(
        access_key=options.get("AWS_ACCESS_KEY_ID"),
        secret_key=options.get("AWS_SECRET_ACCESS_KEY"),
        session_token=options.get("AWS_SESSION_TOKEN"), region=options.get("AWS_REGION"),
        endpoint_override=endpoint.partition("://")[2] or None,
        scheme="http" if endpoint.lower().startswith("http://") else "https",
        force_virtual_addressing=options.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST") == "true")
    return s3, inside
