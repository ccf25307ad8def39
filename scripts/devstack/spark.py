"""The jars the merge job adds to Spark (Kafka source, Avro, Delta), resolved ahead of time."""

from __future__ import annotations

import re
from pathlib import Path

from .maven import resolve_pom

_VERSION_SUFFIX = re.compile(r"-\d[^/]*\.jar$")


def artifact_name(jar: Path) -> str:
    """`jackson-core-2.13.5.jar` -> `jackson-core`."""
    return _VERSION_SUFFIX.sub("", jar.name)


def pyspark_artifacts() -> set[str]:
    try:
        import pyspark
    except ImportError:
        return set()
    return {artifact_name(p) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def spark_jars(cache: Path) -> list[Path]:
    """Jars to pass to spark-submit --jars: ours minus any artifact pyspark already ships
    (in whatever version: two versions of one library on the classpath break Spark)."""
    shipped = pyspark_artifacts()
    return sorted(p for p in resolve_pom(cache, "spark.pom.xml").glob("*.jar")
                  if artifact_name(p) not in shipped)
