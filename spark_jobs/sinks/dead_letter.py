"""Events the job cannot decode: kept with topic, partition, offset and reason, never dropped."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..lake.files import write_batch_files

log = logging.getLogger(__name__)


def write_dead_letters(dead: DataFrame, dest: str, batch_id: int) -> dict[tuple[str, str], int]:
    """Write the batch's dead letters (Parquet, one file set per batch); return how many of
    each (topic, reason). Logged at INFO each batch; the job's `Watch` warns once per topic and
    reason (a reason names the schema id where the schema is the problem)."""
    dead = dead.withColumn("batch_id", F.lit(batch_id)).persist()
    try:
        counts: dict[tuple[str, str], int] = {}
        if dead.count():
            write_batch_files(dead, dest, batch_id)
            for row in (dead.groupBy("topic", "reason").count()
                        .orderBy("topic", "reason").collect()):
                log.info("batch %d: %d undecodable event(s) in %s (%s) written to %s",
                         batch_id, row["count"], row["topic"], row["reason"], dest)
                counts[(row["topic"], row["reason"])] = row["count"]
        return counts
    finally:
        dead.unpersist()
