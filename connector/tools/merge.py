"""pgcdc merge ARGS...: run the Spark merge job (spark_jobs/merge.py) with spark-submit and the
Kafka, Avro and Delta jars (from PGCDC_SPARK_JARS or the cache `scripts/stack` resolves).
Every argument is passed to the job; `pgcdc merge --help` shows them."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("merge", help="merge the change topics into Delta Lake (Spark)",
                              description=__doc__, add_help=False)
    p.set_defaults(handler=handle, passthrough=True, job_args=[])


def handle(args: argparse.Namespace) -> int:
    try:
        from spark_jobs.runtime.submit import main
    except ImportError as exc:
        from connector.errors import ConfigError

        raise ConfigError(f"the merge job needs the spark extra (pip install 'pgcdc[spark]'): "
                          f"{exc}") from None
    return main(args.job_args)
