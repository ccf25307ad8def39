"""The merge job's settings, from the command line (`merge.py --help`) or built in code.

Each option is declared once, as a field of `MergeConfig` with its `option(...)`
(connector/options.py); `parser` and docs/reference/options.md are derived from them.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from connector.options import add_options, option, parsed

from ..lake import storage
from ..rules.names import TableId, subscribe_pattern, table_of
from ..sinks import (
    COLUMN_MAPPING,
    CUTS,
    DATABASE,
    FAST_MERGE,
    FORMATS,
    HISTORY,
    TOMBSTONES,
    LakeFormat,
    lake_format,
    supporting,
)

AVAILABLE_NOW = "available-now"
MAX_TABLES_AT_ONCE = 16  # the default --parallel-tables on a big cluster (`tables_at_once`)
# The default bound of a micro-batch, in Kafka records (`batch_limit`): a few triggers' worth at
# a high rate, so a batch that overran its trigger is not followed by one several times larger.
BATCH_LIMIT = 250_000
# The default --io-tables on an object store (`io_tables_at_once`): requests in flight, not cores
OBJECT_STORE_IO_TABLES = 32
_INTERVAL = re.compile(r"^(\d+)\s*(ms|s|sec|seconds?|m|min|minutes?)$")


def _csv(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


@dataclass(frozen=True)
class MergeConfig:
    """The merge job's settings, each declared once (connector/options.py): the field gives its
    name, type and default, its `option(...)` the flag, help and environment variable; `parser`
    and docs/reference/options.md are derived from them. Fields in the order `--help` shows the
    flags; `MergeConfig(bootstrap_servers, schema_registry_url, target, ...)` positionally (the
    subscription, `topic_prefix` or `topics`, by keyword)."""

    # Same environment variables as `pgcdc run`, so one `eval "$(scripts/stack env)"` serves both.
    bootstrap_servers: str = field(metadata=option(
        "Kafka bootstrap servers", env="KAFKA_BOOTSTRAP_SERVERS"))
    schema_registry_url: str = field(metadata=option(
        "Confluent-compatible Schema Registry API base URL", env="SCHEMA_REGISTRY_URL"))
    topic_prefix: str | None = field(default=None, kw_only=True, metadata=option(
        "subscribe to every table topic of this prefix", group="topics", group_required=True))
    topics: tuple[str, ...] = field(default=(), kw_only=True, metadata=option(
        "comma-separated table topics", type=_csv, group="topics", cli_default=None))
    target: str = field(metadata=option("tables go to TARGET/<schema>/<table>"))
    checkpoint: str | None = field(default=None, metadata=option(
        "default TARGET/_pgcdc/checkpoint"))
    # One of the registry's formats (sinks/__init__.py), as registered when parsing.
    format: str = field(default="delta", metadata=option(
        "delta: a mirror table per source table; parquet: an append-only change log per table "
        "(every event with op and position)", choices=FORMATS))
    trigger: str = field(default="10s", metadata=option(
        "interval (10s, 1m) or available-now"))
    replay: bool = field(default=False, metadata=option(
        "read every topic from earliest to latest into an empty target, stop"))
    # None: BATCH_LIMIT (`batch_limit`).
    max_offsets_per_trigger: int | None = field(default=None, metadata=option(
        "bound a micro-batch to N Kafka records, so a job that fell behind catches up in "
        "batches of that size (available-now reads everything, in several batches) "
        f"(default {BATCH_LIMIT}; 0: everything there; with --consistent-cuts: everything "
        "there, and N is refused)", metavar="N"))
    dead_letter: str | None = field(default=None, metadata=option(
        "default TARGET/_pgcdc/dead_letter"))
    partition_by: tuple[str, ...] = field(default=(), metadata=option(
        "comma-separated columns", type=_csv))
    # 0: `tables_at_once`
    parallel_tables: int = field(default=0, metadata=option(
        "tables of a micro-batch written concurrently (default: Spark's default parallelism, "
        f"the cluster's cores, at least 2, at most {MAX_TABLES_AT_ONCE})"))
    # 0: `io_tables_at_once`, by the store
    io_tables: int = field(default=0, metadata=option(
        "tables of a micro-batch the fast path (delta-rs) writes concurrently (default: by the "
        f"store: on an object store {OBJECT_STORE_IO_TABLES}, as each table waits on requests "
        "rather than the CPU; on local disk as --parallel-tables)", metavar="N"))
    # spark_jobs/runtime/metrics.py
    metrics_port: int = field(default=0, metadata=option(
        "serve Prometheus metrics (per table events, engine, lag behind the producer's "
        "heartbeats; per batch time) on this port of the driver (default 0: off)"))
    metrics_host: str = field(default="0.0.0.0", metadata=option(
        "the address the metrics bind (default 0.0.0.0; 127.0.0.1: this host only)"))
    kafka_options: dict[str, str] = field(default_factory=dict, metadata=option(
        "passed to the Kafka source (repeatable)", flag="--kafka-option", repeat=True,
        type=_option, metavar="kafka.KEY=VALUE"))
    # Of new Delta tables; with change_data_feed, delta.enableChangeDataFeed=true among them.
    table_properties: dict[str, str] = field(default_factory=dict, metadata=option(
        "Delta table property of new tables (repeatable), e.g. "
        "delta.enableChangeDataFeed=true", flag="--table-property", repeat=True, type=_option,
        metavar="delta.KEY=VALUE"))
    change_data_feed: bool = field(default=False, metadata=option(
        "new Delta tables record their Change Data Feed (delta.enableChangeDataFeed=true)"))
    column_mapping: bool = field(default=False, metadata=option(
        "new Delta tables use column mapping (delta.columnMapping.mode=name) and keep the "
        "PostgreSQL column names (spaces, punctuation, any letters); existing tables keep "
        "theirs"))
    database: str | None = field(default=None, metadata=option(
        "register each Delta table in the Spark catalog as NAME.<schema>__<table> (created if "
        "missing)", metavar="NAME"))
    # Tables' parts of a batch through delta-rs (spark_jobs/sinks/delta/delta_rs_writer.py):
    # auto = when delta-rs reaches the target (`fast_merge_on`).
    fast_merge: str = field(default="auto", metadata=option(
        "apply tables' batches through delta-rs (auto: when delta-rs reaches --target: a local "
        "path, s3a://, abfss://, gs://; off: always through Spark)", choices=("auto", "off")))
    # runtime/rounds.py
    fast_merge_max_events: int = field(default=100_000, metadata=option(
        "the fast path collects its tables' records to the driver in rounds of at most N "
        "events (a bound on the driver's memory); a table with more than N events of its own "
        "in a batch goes through Spark (default 100000)", metavar="N"))
    maintenance_every: int = field(default=20, metadata=option(
        "compact a table and its tombstones every N batches the fast path applied to it; "
        "expire tombstones every N batches once the producer's heartbeats vouch for them (not "
        "with available-now or --replay; after a batch that --max-offsets-per-trigger bounded, "
        "at the next one that read all there was) (default 20; 0: never)", metavar="N"))
    # Cuts in <target>/_pgcdc/cuts (spark_jobs/rules/cut_policy.py).
    consistent_cuts: bool = field(default=False, metadata=option(
        "apply only changes the producer's heartbeats vouch for and record each "
        "transaction-consistent cut in TARGET/_pgcdc/cuts (needs `pgcdc run "
        "--heartbeat-interval-s`)"))
    # History tables (SCD type 2, spark_jobs/history/versions.py); patterns as `pgcdc run
    # --tables`.
    history: tuple[str, ...] = field(default=(), metadata=option(
        "keep a history table (SCD type 2) of each table matching these comma-separated "
        "schema.table patterns ('*', 'public.*') at TARGET/_pgcdc/history/<schema>/<table>",
        type=_csv, metavar="PATTERNS"))
    history_columns: tuple[str, ...] = field(default=(), metadata=option(
        "only a change of these columns opens a new version; other changes update the current "
        "version in place", type=_csv, metavar="COLS", group="history columns"))
    history_except_columns: tuple[str, ...] = field(default=(), metadata=option(
        "a change of these columns alone updates the current version in place", type=_csv,
        metavar="COLS", group="history columns"))

    def __post_init__(self) -> None:
        if self.change_data_feed:
            object.__setattr__(self, "table_properties", {  # frozen: set once, here
                **self.table_properties, "delta.enableChangeDataFeed": "true"})
        if bool(self.topic_prefix) == bool(self.topics):
            raise ValueError("give exactly one of --topic-prefix and --topics")
        for topic in self.topics:
            table_of(topic)  # raises for a name that is not <prefix>.<schema>.<table>
        lake_format(self.format)  # raises for a format not in the registry
        if self.trigger != AVAILABLE_NOW and not _INTERVAL.match(self.trigger):
            raise ValueError(f"--trigger must be an interval like 10s or {AVAILABLE_NOW}")
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger < 0:
            raise ValueError("--max-offsets-per-trigger must be positive (0: unbounded)")
        if not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"--metrics-port must be 0-65535, not {self.metrics_port}")
        if self.parallel_tables < 0:
            raise ValueError("--parallel-tables must be positive (0: the cluster's cores)")
        if self.io_tables < 0:
            raise ValueError("--io-tables must be positive (0: chosen by the store)")
        if any(not k.startswith("delta.") for k in self.table_properties):
            raise ValueError("--table-property keys must start with 'delta.': "
                             f"{sorted(self.table_properties)}")
        for feature, on in ((COLUMN_MAPPING, self.column_mapping),
                            (DATABASE, self.database is not None)):
            if on and not self.supports(feature):
                raise ValueError(f"--column-mapping and --database apply to "
                                 f"{supporting(feature)} tables, not to --format {self.format}")
        if self.database is not None and not self.database.strip():
            raise ValueError("--database needs a name")
        if self.fast_merge not in ("auto", "off"):
            raise ValueError(f"--fast-merge must be auto or off, not {self.fast_merge!r}")
        if self.fast_merge_max_events < 0:
            raise ValueError("--fast-merge-max-events must not be negative")
        if self.maintenance_every < 0:
            raise ValueError("--maintenance-every must not be negative")
        if self.history and not self.supports(HISTORY):
            raise ValueError(f"--history applies to {supporting(HISTORY)} tables, not to "
                             f"--format {self.format}")
        self._check_store()
        if self.history_columns and self.history_except_columns:
            raise ValueError("give --history-columns or --history-except-columns, not both")
        if (self.history_columns or self.history_except_columns) and not self.history:
            raise ValueError("--history-columns / --history-except-columns need --history")
        bad = [k for k in self.kafka_options if not k.startswith("kafka.")]
        if bad:
            raise ValueError(f"Kafka options must start with 'kafka.': {bad}")
        if self.consistent_cuts:
            self._check_cuts()

    def _check_cuts(self) -> None:
        """What `--consistent-cuts` cannot work with (docs/design/consistent-cuts.md says why)."""
        if not self.supports(CUTS):
            raise ValueError(f"--consistent-cuts records {supporting(CUTS)} versions: "
                             f"{self.lake_format.about or 'not --format ' + self.format} "
                             "(see docs/merge-job.md)")
        uneven = self.uneven_reading or (
            "--max-offsets-per-trigger leaves some partitions behind the offsets listed"
            if self.max_offsets_per_trigger else None)
        if uneven:
            raise ValueError(f"--consistent-cuts needs batches that read to the latest offsets "
                             f"Spark listed, after a previous batch: {uneven}")
        self.heartbeat_topic  # noqa: B018 - raises for topics of several prefixes

    def _check_store(self) -> None:
        """Features written through delta-rs (history tables, the cuts manifest) need a
        target delta-rs reaches: local disk or an object store (spark_jobs/lake/storage.py)."""
        kind = storage.scheme(self.target)
        if kind in storage.DELTA_RS_SCHEMES:
            return
        for feature, on in (("--history", bool(self.history)),
                            ("--consistent-cuts", self.consistent_cuts)):
            if on:
                raise ValueError(f"{feature} writes through delta-rs, which does not reach "
                                 f"{kind}:// paths: give --target as a local path, s3a://, "
                                 "abfss:// or gs://")

    @property
    def batch_limit(self) -> int | None:
        """The Kafka records one micro-batch reads at most (Spark's `maxOffsetsPerTrigger`;
        None: all there are): `--max-offsets-per-trigger`, by default `BATCH_LIMIT`, so a
        streaming job that fell behind catches up in batches of a bounded size rather than in
        ever larger ones; available-now and --replay still read everything, in several batches.
        None with --consistent-cuts (its argument needs batches that read to the offsets Spark
        listed, `_check_cuts`) and with 0."""
        if self.max_offsets_per_trigger is None:
            return None if self.consistent_cuts else BATCH_LIMIT
        return self.max_offsets_per_trigger or None

    @property
    def uneven_reading(self) -> str | None:
        """Why batches may not read to the latest offsets Spark listed, one after another
        (None: they do, or a bounded batch says it did not: `expiry.read_to_listed`). The
        heartbeat arguments (rules/cut_policy.py, rules/expiry.py) need them to."""
        if self.available_now:
            return ("available-now and --replay read what is there and stop: no batch after "
                    "the one that read a heartbeat")
        return None

    @property
    def expiry_off(self) -> str | None:
        """Why this job expires no tombstones (None: it does, every --maintenance-every
        batches, with the bound spark_jobs/rules/expiry.py derives from the heartbeats it reads)."""
        if not self.supports(TOMBSTONES):
            return f"--format {self.format} keeps no tombstones"
        if not self.maintenance_every:
            return "--maintenance-every 0"
        if self.uneven_reading:
            return self.uneven_reading
        if self.topics and not self.consistent_cuts:
            return ("--topics without --consistent-cuts: the heartbeat topic is read only "
                    "with --topic-prefix (it may not exist)")
        return None

    @property
    def reads_heartbeats(self) -> bool:
        """Whether the job uses the heartbeats of `<prefix>.heartbeat`: for its cuts, or for
        tombstone expiry."""
        return self.consistent_cuts or self.expiry_off is None

    @property
    def subscribes_heartbeats(self) -> bool:
        """Whether the job's Kafka source includes `<prefix>.heartbeat`: always with
        --topic-prefix (a pattern: read once the producer's heartbeats exist), whether or not
        this run uses them, so that every run on one checkpoint has one subscription (a
        streaming run followed by an available-now one: Spark fails a query whose checkpoint
        holds a partition its subscription lost, as if the topic were deleted); with --topics,
        for --consistent-cuts (the topic must exist)."""
        return bool(self.topic_prefix) or self.consistent_cuts

    @property
    def lake_format(self) -> LakeFormat:
        """The `--format`'s entry in the format registry (spark_jobs/sinks/__init__.py)."""
        return lake_format(self.format)

    def supports(self, feature: str) -> bool:
        """Whether the `--format` supports `feature` (one of spark_jobs.sinks' features)."""
        return feature in self.lake_format.features

    @property
    def checkpoint_dir(self) -> str:
        return self.checkpoint or f"{self.target.rstrip('/')}/_pgcdc/checkpoint"

    @property
    def dead_letter_dir(self) -> str:
        return self.dead_letter or f"{self.target.rstrip('/')}/_pgcdc/dead_letter"

    @property
    def fast_merge_on(self) -> bool:
        """Small Delta batches go through delta-rs: with auto, when delta-rs reaches the
        target (local disk, object stores: lake/storage.py derives its settings from Spark's)."""
        return (self.supports(FAST_MERGE) and self.fast_merge == "auto"
                and storage.scheme(self.target) in storage.DELTA_RS_SCHEMES)

    def tables_at_once(self, cores: int) -> int:
        """How many tables of a batch are written concurrently, on a cluster of `cores`
        (Spark's default parallelism): `--parallel-tables`, or one per core, at least 2 (a
        table's commit waits on its store more than it computes) and at most
        `MAX_TABLES_AT_ONCE` (each table's planning, py4j calls and Delta commits run on the
        driver, one Python process: past that, more threads wait on it, not on the cluster)."""
        return self.parallel_tables or max(2, min(cores, MAX_TABLES_AT_ONCE))

    def io_tables_at_once(self, cores: int) -> int:
        """How many tables of a batch the fast path (delta-rs) writes concurrently:
        `--io-tables`, or by the store. On an object store a table's part is mostly waiting:
        ~25 requests one after another, each a round trip of tens of milliseconds, with the
        CPU idle meanwhile (delta-rs releases the interpreter while it waits), so requests in
        flight, not cores, bound a many-table batch: `OBJECT_STORE_IO_TABLES` (at least
        `tables_at_once`). On local disk a table's part is CPU, as many as `tables_at_once`.
        What stays bounded by cores: the Spark path's tables (`tables_at_once` of them at
        once, whichever pool runs them); the driver's memory by the rounds
        (`--fast-merge-max-events`), whatever the threads."""
        if self.io_tables:
            return self.io_tables
        cpu = self.tables_at_once(cores)
        if storage.scheme(self.target) in storage.OBJECT_STORE_SCHEMES:
            return max(cpu, OBJECT_STORE_IO_TABLES)
        return cpu

    def keeps_history(self, table: TableId) -> bool:
        """Whether `table` matches a --history pattern (its PostgreSQL `schema.table`)."""
        return any(fnmatchcase(table.source_name, p) for p in self.history)

    @property
    def available_now(self) -> bool:
        return self.replay or self.trigger == AVAILABLE_NOW

    @property
    def interval(self) -> str:
        """Spark's processingTime form of the trigger ("10 seconds")."""
        match = _INTERVAL.match(self.trigger)
        if not match:
            raise ValueError(f"{self.trigger!r} is not an interval")
        number, unit = match.groups()
        unit = {"ms": "milliseconds", "s": "seconds", "sec": "seconds", "m": "minutes",
                "min": "minutes"}.get(unit, unit if unit.endswith("s") else unit + "s")
        return f"{number} {unit}"

    @property
    def heartbeat_topic(self) -> str:
        """`<prefix>.heartbeat` of the subscribed tables' prefix (with --topics: their one
        prefix)."""
        if self.topic_prefix:
            return f"{self.topic_prefix}.heartbeat"
        prefixes = {t.rsplit(".", 2)[0] for t in self.topics}
        if len(prefixes) != 1:
            raise ValueError("heartbeats are read for topics of one prefix, "
                             f"not {sorted(prefixes)}")
        return f"{prefixes.pop()}.heartbeat"

    def subscription(self) -> tuple[str, str]:
        """The Kafka source's (option, value): a pattern, so new tables appear without a
        restart, or a fixed topic list; the heartbeat topic too (`subscribes_heartbeats`)."""
        if self.topic_prefix:
            pattern = subscribe_pattern(self.topic_prefix)
            return "subscribePattern", f"{pattern}|^{re.escape(self.heartbeat_topic)}$"
        topics = [*self.topics, self.heartbeat_topic] if self.consistent_cuts else self.topics
        return "subscribe", ",".join(topics)


def parser(prog: str = "merge.py") -> argparse.ArgumentParser:
    """`merge.py`'s (and `pgcdc merge`'s) parser: a flag per field of `MergeConfig`, declared
    there; the environment variables named there read now, as defaults."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Merge pgcdc change events from Kafka into Delta Lake tables "
                    "(or an append-only Parquet change log).")
    add_options(p, MergeConfig, layered=False)
    return p


def parse_args(argv: Sequence[str] | None = None, prog: str = "merge.py") -> MergeConfig:
    p = parser(prog)
    args = p.parse_args(argv)
    try:
        return MergeConfig(**parsed(args, MergeConfig))
    except ValueError as exc:
        p.error(str(exc))
        raise  # unreachable: error() exits
