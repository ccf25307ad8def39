"""Small file operations through Hadoop's FileSystem (local disk, HDFS, object stores alike),
and exactly-once batch files for the append-only outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession


class HadoopFs:
    def __init__(self, spark: SparkSession, path: str) -> None:
        jvm: Any = spark.sparkContext._jvm  # noqa: SLF001 - the only handle on Hadoop's FS
        self._jvm = jvm
        self._path = jvm.org.apache.hadoop.fs.Path(path)
        conf = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001
        self._fs = self._path.getFileSystem(conf)

    def _p(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def qualified(self, path: str) -> str:
        """`path` absolute, with its scheme (`file:/...`, `s3a://...`): a catalog location."""
        return str(self._fs.makeQualified(self._p(path)).toString())

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._p(path)))

    def has_entries(self, path: str) -> bool:
        p = self._p(path)
        return bool(self._fs.exists(p)) and len(self._fs.listStatus(p)) > 0

    def read_text(self, path: str) -> str:
        stream = self._fs.open(self._p(path))
        try:
            reader = self._jvm.java.io.BufferedReader(
                self._jvm.java.io.InputStreamReader(stream, "UTF-8"))
            return str(reader.readLine() or "")
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._p(path), True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()

    def glob(self, pattern: str) -> list[str]:
        found = self._fs.globStatus(self._p(pattern))
        return [str(s.getPath().toString()) for s in (found or [])]

    def delete(self, path: str) -> None:
        self._fs.delete(self._p(path), True)

    def rename(self, src: str, dst: str) -> None:
        parent = self._p(dst).getParent()
        self._fs.mkdirs(parent)
        if not self._fs.rename(self._p(src), self._p(dst)):
            raise OSError(f"could not move {src} to {dst}")


def write_batch_files(df: DataFrame, dest: str, batch_id: int,
                      partition_by: Sequence[str] = ()) -> None:
    """Append `df` under `dest` as Parquet files named after the batch.

    Writing to a staging directory, then moving the files to names derived from `batch_id`
    (after removing any left by an earlier attempt of the same batch) makes a batch that Spark
    re-runs after a crash replace its own files instead of duplicating them."""
    dest = dest.rstrip("/")
    fs = HadoopFs(df.sparkSession, dest)
    staging = f"{dest}/_staging/batch-{batch_id}"
    df.write.mode("overwrite").partitionBy(*partition_by).parquet(staging)
    stem = f"batch-{batch_id:012d}"
    levels = "/*" * len(partition_by)
    for old in fs.glob(f"{dest}{levels}/{stem}-*.parquet"):
        fs.delete(old)
    prefix = fs.glob(staging)[0] if fs.glob(staging) else staging
    for n, src in enumerate(sorted(fs.glob(f"{staging}{levels}/part-*.parquet"))):
        relative_dir = src[len(prefix):].rsplit("/", 1)[0]
        fs.rename(src, f"{dest}{relative_dir}/{stem}-{n:05d}.parquet")
    fs.delete(staging)
