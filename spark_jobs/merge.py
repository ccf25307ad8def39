"""spark-submit entry point of the merge job.

    spark-submit --jars <kafka, avro, delta jars> spark_jobs/merge.py \\
        --bootstrap-servers HOST:9092 --schema-registry-url URL --topic-prefix P \\
        --target DIR [--checkpoint DIR] [--format delta|parquet] [--trigger 10s|available-now]
        [--replay] [--max-offsets-per-trigger N] [--dead-letter DIR] [--partition-by a,b]
        [--table-property delta.K=V] [--change-data-feed] [--column-mapping] [--database NAME]

`python -m spark_jobs.submit ...` (and `pgcdc merge`) build that command with the jars.
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

from spark_jobs.config import parse_args  # noqa: E402
from spark_jobs.job import ReplayTargetNotEmpty, run_merge  # noqa: E402
from spark_jobs.session import DELTA_CONF  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                                                   "%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per registry request
    builder = SparkSession.builder.appName("pgcdc-merge")
    for key, value in DELTA_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        stats = run_merge(spark, config)
    except ReplayTargetNotEmpty as exc:
        print(f"merge: {exc}", file=sys.stderr)
        return 2
    except StreamingQueryException as exc:
        # Spark has logged the whole trace; restarting resumes from the checkpoint.
        reason = str(exc).strip().splitlines()[0][:500]
        print(f"merge: the streaming query failed (restart resumes from "
              f"{config.checkpoint_dir}): {reason}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(f"merge: {stats.batches} batch(es), {stats.events} event(s), "
          f"{stats.dead_letters} dead letter(s) to {config.dead_letter_dir}")
    for reason in stats.failed_tables.values():
        print(f"merge: ERROR: {reason}; its events are dead letters in "
              f"{config.dead_letter_dir} (README: recovering a table)", file=sys.stderr)
    if stats.dead_letters:
        print(f"merge: WARNING: {stats.dead_letters} event(s) not merged; see "
              f"{config.dead_letter_dir}", file=sys.stderr)
    return 3 if stats.failed_tables else 0


if __name__ == "__main__":
    sys.exit(main())
