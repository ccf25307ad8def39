"""pgcdc run: stream the slot's changes to Kafka as Avro, one topic per table.

Configuration: flags override the YAML --config file, which overrides the environment
(PGCDC_DSN, KAFKA_BOOTSTRAP_SERVERS, SCHEMA_REGISTRY_URL). librdkafka settings (TLS, SASL, ...)
go under `kafka:` in the file or as repeated --kafka key=value flags.
SIGTERM / SIGINT drain in-flight deliveries, confirm what Kafka acknowledged, and exit 0.

Initial snapshot (--snapshot): with a new slot, every published table's rows are first
published as `r` events read in one consistent snapshot, then streaming starts exactly where
the snapshot ends. An interrupted snapshot is restarted from scratch by the next run (the
slot is created only once the snapshot is complete); see connector/snapshot.
With --snapshot never, a missing slot is created only on a first run: if the topics of
--topic-prefix already hold events, the slot was lost and the changes since then with it, so
pgcdc exits with an error instead (re-snapshot with --snapshot initial, or create the slot
yourself to accept the gap).
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from connector import config as config_mod
from connector import speedups
from connector.errors import ConfigError
from connector.options import add_options, parsed
from connector.redact import RedactSecrets


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="stream PostgreSQL changes to Kafka",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", metavar="FILE", help="YAML configuration file")
    # A flag per setting of connector/config.py's Config, declared there: unset flags are None,
    # so the YAML file and the environment still apply.
    add_options(p, config_mod.Config, layered=True)
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    p.set_defaults(handler=handle)


def config_from_args(args: argparse.Namespace) -> config_mod.Config:
    overrides = parsed(args, config_mod.Config)
    kafka = overrides.pop("kafka")  # added to the file's `kafka:` settings, not replacing them
    cfg = config_mod.load(args.config, overrides)
    if kafka:
        cfg.kafka.update(config_mod.resolve_secrets(kafka))
    return cfg


def handle(args: argparse.Namespace) -> int:
    level = getattr(logging, str(args.log_level).upper(), None)
    if not isinstance(level, int):
        raise ConfigError(f"unknown log level {args.log_level!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for handler in logging.getLogger().handlers:  # libraries log URLs with user:password
        handler.addFilter(RedactSecrets())
    cfg = config_from_args(args)  # a configuration error is the first and only line
    speedups.announce()  # which implementation runs; PGCDC_NATIVE=on without it: stop here
    from connector.pipeline import run_pipeline

    return run_pipeline(cfg)
