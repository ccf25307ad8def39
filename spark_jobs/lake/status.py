"""`pgcdc lake status`: where each table of a lake stands, read from the lake, the merge job's
checkpoint and Kafka; no Spark, no change to the job.

Per table (the job's topics are listed in its checkpoint's newest offset log):

* **behind**: records of the table's topic the job has not applied: Kafka's end offset minus
  the offset the job's newest *committed* batch read up to, over the topic's partitions
  (Spark's checkpoint: `offsets/<N>` holds what batch N reads, `commits/<N>` says it was
  committed). Exact, whatever the table's activity: an idle table is 0 behind.
* **lag_s**: how old the oldest of those records is (now minus its Kafka timestamp, which the
  producer sets when PostgreSQL's change reaches it), 0 when nothing is behind. This is the
  freshness an operator alerts on (`--max-lag-s`): a table stuck behind a dead-lettered schema,
  a failing table or a job stuck in a backlog shows a growing lag; one without changes does not.
* the Delta table's version, files and bytes, its last commit's time; tombstones waiting for
  expiry (rows of `_pgcdc/tombstones/<schema>/<table>`); dead letters of its topic.

The producer's newest heartbeat on Kafka (`<prefix>.heartbeat`, when the job reads it) says
until when the producer was known to be publishing: a lag figure is only as new as that.

Pure but for `read_status` (and the readers it calls): `parse_offsets`, `table_lag`,
`too_late` and the renderers are tested alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..rules.names import table_of
from .storage import pyarrow_filesystem

HEARTBEAT_SUFFIX = ".heartbeat"


@dataclass(frozen=True)
class TableStatus:
    table: str  # "<schema>/<table>"
    topic: str
    behind: int | None = None  # records not applied (None: Kafka not asked)
    lag_s: float | None = None  # age of the oldest of them; 0 when none
    version: int | None = None  # Delta version (None: no table yet)
    files: int = 0
    bytes: int = 0
    last_commit: str | None = None  # ISO time of the table's newest Delta commit
    tombstones: int = 0
    dead_letters: int = 0


@dataclass(frozen=True)
class LakeStatus:
    target: str
    checkpoint: str
    batch: int | None  # the job's newest committed batch
    heartbeat: str | None = None  # ISO time of the producer's newest heartbeat on Kafka
    tables: list[TableStatus] = field(default_factory=list)


def parse_offsets(text: str) -> dict[str, dict[int, int]]:
    """A Spark checkpoint offset log (`v1`, the batch's metadata, then one JSON line per
    source: topic → partition → next offset) → topic → partition → next offset to read."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("v"):
        raise ValueError("not a Spark offset log")
    out: dict[str, dict[int, int]] = {}
    for line in lines[2:]:
        source = json.loads(line)
        if isinstance(source, dict):
            for topic, parts in source.items():
                out[topic] = {int(p): int(o) for p, o in parts.items()}
    return out


def table_lag(read_to: Mapping[int, int], ends: Mapping[int, int],
              oldest_ms: Iterable[int], now_ms: int) -> tuple[int, float]:
    """(records behind, lag in seconds) of one topic: `read_to` the next offset the job reads
    per partition, `ends` Kafka's end offsets, `oldest_ms` the timestamps of the first record
    not read in each partition that has one."""
    behind = sum(max(0, end - read_to.get(p, 0)) for p, end in ends.items())
    if not behind:
        return 0, 0.0
    oldest = min(oldest_ms, default=now_ms)
    return behind, max(0.0, (now_ms - oldest) / 1000)


def too_late(status: LakeStatus, max_lag_s: float) -> list[TableStatus]:
    """The tables whose lag is over `max_lag_s` (a health check's failures)."""
    return [t for t in status.tables if t.lag_s is not None and t.lag_s > max_lag_s]


def render_json(status: LakeStatus) -> str:
    return json.dumps(asdict(status), sort_keys=True)


def render_text(status: LakeStatus) -> str:
    head = (f"lake {status.target}  checkpoint {status.checkpoint}  "
            f"last batch {status.batch if status.batch is not None else '-'}  "
            f"producer heartbeat {status.heartbeat or '-'}")
    rows = [("TABLE", "BEHIND", "LAG S", "VERSION", "FILES", "MB", "LAST COMMIT", "TOMBSTONES",
             "DEAD LETTERS")]
    for t in status.tables:
        rows.append((t.table, "-" if t.behind is None else str(t.behind),
                     "-" if t.lag_s is None else f"{t.lag_s:.1f}",
                     "-" if t.version is None else str(t.version), str(t.files),
                     f"{t.bytes / 1e6:.1f}", t.last_commit or "-", str(t.tombstones),
                     str(t.dead_letters)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in rows]
    return "\n".join([head, *lines])


def _iso(ms: float | None) -> str | None:
    if ms is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


# --- reading the lake, the checkpoint and Kafka ----------------------------------------------
def read_checkpoint(checkpoint: str) -> tuple[int | None, dict[str, dict[int, int]]]:
    """(the newest committed batch, what it read up to) of a Spark checkpoint; (None, {})
    when no batch was committed yet."""
    fs, root = pyarrow_filesystem(checkpoint)
    from pyarrow import fs as pafs

    commits = [info.base_name for info in fs.get_file_info(
        pafs.FileSelector(f"{root}/commits", allow_not_found=True))]
    batches = sorted(int(name) for name in commits if name.isdigit())
    if not batches:
        return None, {}
    with fs.open_input_stream(f"{root}/offsets/{batches[-1]}") as f:
        return batches[-1], parse_offsets(f.read().decode())


def _delta(path: str) -> Any:
    from deltalake import DeltaTable

    from .storage import options_for

    options = options_for(path)
    return DeltaTable(path, storage_options=options) \
        if DeltaTable.is_deltatable(path, storage_options=options) else None


def _lake_table(target: str, rel: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    table = _delta(f"{target}/{rel}")
    if table is not None:
        actions = table.get_add_actions(flatten=True)
        sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
        commit = table.history(1)
        out.update(version=table.version(), files=len(sizes), bytes=int(sum(sizes)),
                   last_commit=_iso(commit[0].get("timestamp")) if commit else None)
    tombstones = _delta(f"{target}/_pgcdc/tombstones/{rel}")
    if tombstones is not None:
        actions = tombstones.get_add_actions(flatten=True)
        if actions.num_rows:
            out["tombstones"] = int(sum(n or 0 for n in actions.column("num_records")
                                        .to_pylist()))
    return out


def _dead_letters(dead_letter_dir: str) -> dict[str, int]:
    """Topic → dead letters, from the job's dead-letter Parquet files."""
    import pyarrow.dataset as ds

    fs, root = pyarrow_filesystem(dead_letter_dir)
    from pyarrow import fs as pafs

    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        return {}
    topics = ds.dataset(root, filesystem=fs, format="parquet").to_table(
        columns=["topic"]).column("topic").to_pylist()
    counts: dict[str, int] = {}
    for topic in topics:
        counts[topic] = counts.get(topic, 0) + 1
    return counts


def _kafka(bootstrap: str, read_to: dict[str, dict[int, int]], options: Mapping[str, str]
           ) -> tuple[dict[str, dict[int, int]], dict[str, list[int]], int | None]:
    """End offsets per topic, the timestamps of the first unread record of each partition
    behind, and the newest heartbeat's timestamp (ms)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pgcdc-lake-status",
                         "enable.auto.commit": False, **options})
    try:
        ends: dict[str, dict[int, int]] = {}
        oldest: dict[str, list[int]] = {}
        newest_heartbeat: int | None = None
        for topic, parts in read_to.items():
            metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
            partitions = sorted(metadata.partitions) if metadata and metadata.partitions \
                else sorted(parts)
            ends[topic] = {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                             timeout=10)[1] for p in partitions}
            if topic.endswith(HEARTBEAT_SUFFIX):
                newest_heartbeat = _timestamp_at(consumer, topic, ends[topic], -1)
                continue
            behind = [p for p, end in ends[topic].items() if end > parts.get(p, 0)]
            oldest[topic] = [ts for p in behind
                             if (ts := _timestamp_at(consumer, topic, {p: parts.get(p, 0)}, 0))
                             is not None]
        return ends, oldest, newest_heartbeat
    finally:
        consumer.close()


def _timestamp_at(consumer: Any, topic: str, offsets: Mapping[int, int], shift: int
                  ) -> int | None:
    """The Kafka timestamp of the record at `offset + shift` in each partition (the newest
    of them); None if none is there."""
    from confluent_kafka import TopicPartition

    found: list[int] = []
    for partition, offset in offsets.items():
        at = offset + shift
        if at < 0:
            continue
        consumer.assign([TopicPartition(topic, partition, at)])
        message = consumer.poll(10)
        if message is not None and not message.error():
            found.append(message.timestamp()[1])
    return max(found) if found else None


def read_status(target: str, checkpoint: str | None = None, dead_letter: str | None = None,
                bootstrap: str | None = None, kafka_options: Mapping[str, str] | None = None,
                now_ms: int | None = None) -> LakeStatus:
    target = target.rstrip("/")
    checkpoint = checkpoint or f"{target}/_pgcdc/checkpoint"
    batch, read_to = read_checkpoint(checkpoint)
    dead = _dead_letters(dead_letter or f"{target}/_pgcdc/dead_letter")
    ends: dict[str, dict[int, int]] = {}
    oldest: dict[str, list[int]] = {}
    heartbeat = None
    if bootstrap and read_to:
        ends, oldest, heartbeat = _kafka(bootstrap, read_to, kafka_options or {})
    now_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    tables = []
    for topic in sorted(t for t in read_to if not t.endswith(HEARTBEAT_SUFFIX)):
        rel = table_of(topic).path
        behind = lag = None
        if topic in ends:
            behind, lag = table_lag(read_to[topic], ends[topic], oldest.get(topic, []), now_ms)
        tables.append(TableStatus(table=rel, topic=topic, behind=behind, lag_s=lag,
                                  dead_letters=dead.get(topic, 0),
                                  **_lake_table(target, rel)))
    return LakeStatus(target, checkpoint, batch, _iso(heartbeat), tables)
