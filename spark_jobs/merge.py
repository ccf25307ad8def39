"""spark-submit entry point of the merge job.

    spark-submit --jars <kafka, avro, delta jars> spark_jobs/merge.py \\
        --bootstrap-servers HOST:9092 --schema-registry-url URL --topic-prefix P \\
        --target DIR [--checkpoint DIR] [--format delta|parquet] [--trigger 10s|available-now]
        [--replay] [--max-offsets-per-trigger N] [--dead-letter DIR] [--partition-by a,b]
        [--table-property delta.K=V] [--change-data-feed] [--column-mapping] [--database NAME]

`python -m spark_jobs.runtime.submit ...` (and `pgcdc merge`) build that command with the jars.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    # spark-submit runs this file as a script: make the `spark_jobs` package importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from spark_jobs.lake.lease import LakeError  # noqa: E402
from spark_jobs.runtime.config import parse_args  # noqa: E402
from spark_jobs.runtime.console import (  # noqa: E402
    SourceUnreachable,
    check_kafka,
    check_registry,
    job_stderr,
    query_failure,
    say,
)
from spark_jobs.runtime.query import ReplayTargetNotEmpty, run_merge  # noqa: E402
from spark_jobs.runtime.session import DELTA_CONF  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    err = job_stderr()
    logging.basicConfig(level=logging.INFO, stream=err,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per registry request
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its callback server's start-up
    try:  # seconds, not Spark's minutes of retries, to tell a wrong address
        check_kafka(config.bootstrap_servers)
        check_registry(config.schema_registry_url)
    except SourceUnreachable as exc:
        say(err, str(exc))
        return 1
    builder = SparkSession.builder.appName("pgcdc-merge")
    for key, value in DELTA_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        stats = run_merge(spark, config)
    except (ReplayTargetNotEmpty, LakeError) as exc:
        say(err, str(exc))
        return 2
    except StreamingQueryException as exc:
        # Spark has logged the whole trace; restarting resumes from the checkpoint.
        say(err, f"the streaming query failed (restart resumes from {config.checkpoint_dir}): "
                 f"{query_failure(str(exc), config.bootstrap_servers)}")
        return 1
    finally:
        spark.stop()
    say(err, f"{stats.batches} batch(es), {stats.events} event(s), "
             f"{stats.dead_letters} dead letter(s) to {config.dead_letter_dir}")
    if config.consistent_cuts:
        say(err, f"{stats.cuts} consistent cut(s) recorded in "
                 f"{config.target.rstrip('/')}/_pgcdc/cuts ({stats.held} change(s) held back "
                 "for the next batch)")
    for reason in stats.failed_tables.values():
        say(err, f"ERROR: {reason}; its events are dead letters in {config.dead_letter_dir} "
                 "(docs/merge-job.md: recovering a table)")
    if stats.dead_letters:
        say(err, f"WARNING: {stats.dead_letters} event(s) not merged; see "
                 f"{config.dead_letter_dir}")
    return 3 if stats.failed_tables else 0

if __name__ == "__main__":
    sys.exit(main())
