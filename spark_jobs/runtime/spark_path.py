"""A table's part of a batch through Spark: any format, any batch the fast path does not take
(`delta_rs_path.py`). Its events are decoded from the batch's cached Kafka records
(`events/decode.py`), one part per key schema they were written with (`engine.key_groups`), the
changes `--consistent-cuts` holds back filtered out (`cuts/batch.py`), the table's upstream
incarnation decided (`rules/incarnation.py`) before anything is written, and each part applied
by the table's sink (`TableSink.apply`). What was applied goes back to the batch as a
`TableApplied` (`engine.py`); the batch does the rest once per table."""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..cuts.batch import BatchCut
from ..events.decode import TopicPlan, decode_topic, split_corrupt
from ..events.wire import KEY_SCHEMA_ID
from ..lake.phases import CLOCK
from ..rules.changes import IDX, LSN, OP, TOAST, TS, Position
from ..rules.incarnation import decide, drop_applies, drop_of, of_schema
from ..rules.names import TableId, table_of
from ..sinks.mirror import Mirror
from ..sinks.table_sink import BatchFacts
from .engine import BatchTables, TableApplied, key_groups

log = logging.getLogger(__name__)


def table_facts(decoded: DataFrame) -> tuple[int, BatchFacts]:
    """(corrupt events, facts) of one topic's decoded batch, in one aggregation."""
    row = decoded.agg(
        F.count_if(F.col(OP).isNull()).alias("corrupt"),
        F.count_if(F.col(OP).isin("c", "u", "r", "d")).alias("events"),
        F.count_if(F.col(OP) == "d").alias("deletes"),
        F.max(F.when(F.col(OP) == "t", F.struct(F.col(LSN), F.col(IDX)))).alias("truncate"),
        F.min(F.when(F.col(OP).isNotNull(), F.struct(F.col(LSN), F.col(IDX)))).alias("first"),
        F.array_distinct(F.flatten(F.collect_set(
            F.when(F.size(F.col(TOAST)) > 0, F.col(TOAST))))).alias("toast"),
        F.max(F.when(F.col(OP).isNotNull(), F.col(TS))).alias("newest"),
        F.max(F.when(F.col(OP).isNotNull(), F.col(LSN))).alias("newest_lsn"),
    ).first()
    assert row is not None
    truncate = Position(*row["truncate"]) if row["truncate"] is not None else None
    first = Position(*row["first"]) if row["first"] is not None else None
    return row["corrupt"], BatchFacts(row["events"], row["deletes"], truncate,
                                      sorted(row["toast"] or []), first, row["newest"],
                                      row["newest_lsn"])


class SparkPath:
    """The Spark path of one run (thread-safe: each call runs in its worker's session)."""

    def __init__(self, tables: BatchTables) -> None:
        self.tables = tables

    def apply(self, frames: DataFrame, topic: str, plan: TopicPlan, batch_id: int,
              cut: BatchCut | None, cached: ExitStack) -> TableApplied | None:
        """The table's part of the batch through Spark, its decoded frames cached until
        `cached` closes; None when all its events were of a table dropped since."""
        table = table_of(topic)
        sink = self.tables.sink(table)
        mirror = sink.mirror
        # The table's naming is fixed when it is created: column mapping, original names.
        original = sink.original_names(self.tables.session())
        groups = key_groups(plan) if mirror is not None else [None]
        # One new incarnation alone (a new table, or a table re-created upstream): its first
        # position is the decoded part's own (`table_facts`), so the decision waits for it
        # rather than decoding the part once more.
        label = (self._one_new_incarnation(plan, mirror)
                 if mirror is not None and cut is None and len(groups) == 1 else None)
        if mirror is not None and label is None:
            plan = self._incarnation(frames, topic, plan, mirror, original)
            if not plan.schemas:
                log.info("batch %d: %s: only events of a table dropped since", batch_id,
                         table.path)
                return None
            groups = key_groups(plan)
        # Each event is merged by the key it was written with: a batch holding events of
        # several key schemas (a primary key changed or dropped) is applied to a mirror one
        # key at a time, the key whose events come first first (see `key_groups`).
        parts: list[tuple[DataFrame, int | None]] = []
        for group in groups:
            # Events with a key schema the registry does not know go with the newest key.
            unknown = [k for k, r in plan.keys.items() if k is not None and r is None]
            ids = [group, *unknown] if group == plan.key_schema_id else [group]
            part = frames if len(groups) == 1 else frames.where(
                F.col(KEY_SCHEMA_ID).isNull() if group is None
                else F.col(KEY_SCHEMA_ID).isin(ids))
            decoded = decode_topic(part, topic, plan, original).persist()
            cached.callback(decoded.unpersist)
            parts.append((decoded, group))
        # --consistent-cuts: a filter in front of the merge, which stays the same.
        with CLOCK.timing("decode"):  # table_facts is the first action on the decode
            found = [(*table_facts(kept), kept, group) for kept, group in
                     ((cut.hold(decoded, topic) if cut else decoded, group)
                      for decoded, group in parts)]
        found.sort(key=lambda f: (f[1].first is None, f[1].first or Position(0, 0)))
        if label is not None:
            assert mirror is not None
            if not self._take_new_incarnation(table, mirror, label, found[0][1].first,
                                              found[0][2]):
                log.info("batch %d: %s: only events of a table dropped since", batch_id,
                         table.path)
                return None
        decoded_at = time.monotonic()
        dead, events, applied = [], 0, []
        for corrupt, facts, decoded, group in found:
            changes, corrupt_rows = split_corrupt(decoded, frames, topic)
            known = group is None or plan.keys.get(group) is not None
            key = plan.key_columns(original, group if known and len(found) > 1 else -1)
            applied.append((changes, key))
            if corrupt:
                dead.append(corrupt_rows)  # recomputed from the cached frames later
            events += facts.events
            sink.apply(self.tables.session(), changes, facts, key, batch_id,
                       part="" if len(found) == 1 or group == plan.key_schema_id
                       else f"#key{group}")
        history = self.tables.history
        events_of = (history.of_frames(table, applied, plan.key_columns(original))
                     if history is not None and mirror is not None else None)
        return TableApplied(
            "spark" if mirror is not None else self.tables.config.format, events,
            max((f[1].newest_ts for f in found if f[1].newest_ts is not None), default=None),
            max((f[1].newest_lsn for f in found if f[1].newest_lsn is not None), default=None),
            events_of, dead, decoded_at)

    @staticmethod
    def _one_new_incarnation(plan: TopicPlan, sink: Mirror) -> int | None:
        """The relation id of every schema of `plan` when they all have the same one and the
        table does not hold it yet (else None: `_incarnation` decides)."""
        labels = {of_schema(schema) for schema in plan.schemas.values()}
        current = sink.incarnation
        if len(labels) != 1 or None in labels or any(
                drop_of(schema) for schema in plan.schemas.values()):
            return None
        label = labels.pop()
        return None if current is not None and current.relation_id == label else label

    def _take_new_incarnation(self, table: TableId, sink: Mirror, label: int,
                              first: Position | None, decoded: DataFrame) -> bool:
        """`_incarnation`'s decision for a part of one incarnation (`_one_new_incarnation`)
        whose first change is `first` (None: no decodable change); the table replaced or
        labelled first when needed. False: its events are of a table dropped since."""
        current = sink.incarnation
        decision = decide(current, {label: first} if first is not None else {})
        if label not in decision.keep:
            return False
        if decision.table is not None and decision.changes(current):
            self.tables.take(table, sink, decision.table, decision.replace, decoded)
        return True

    def _incarnation(self, frames: DataFrame, topic: str, plan: TopicPlan,
                     sink: Mirror, original: bool) -> TopicPlan:
        """The plan of the events the table's upstream incarnation takes
        (`spark_jobs/rules/incarnation.py`), the table replaced or labelled first when needed."""
        drops = {sid: drop for sid, schema in plan.schemas.items()
                 if (drop := drop_of(schema)) is not None}
        # A drop event is never an incarnation's first change (it may follow the next one's).
        labels = {sid: of_schema(schema) for sid, schema in plan.schemas.items()
                  if sid not in drops}
        current = sink.incarnation
        if not drops and set(labels.values()) <= {None, current.relation_id if current else None}:
            return plan
        firsts: dict[int | None, Position] = {}
        for label in set(labels.values()):
            part = replace(plan, schemas={sid: schema for sid, schema in plan.schemas.items()
                                          if sid in labels and labels[sid] == label})
            row = (decode_topic(frames, topic, part, original).where(F.col(OP).isNotNull())
                   .agg(F.min(F.struct(LSN, IDX))).first())
            if row is not None and row[0] is not None:
                firsts[label] = Position(*row[0])
        decision = decide(current, firsts)
        changes = {sid for sid, label in labels.items() if label in decision.keep}
        exists = bool(changes) or sink.exists(self.tables.session())
        emptied = {sid for sid, drop in drops.items()
                   if drop_applies(decision.table, drop, exists)}
        kept = replace(plan, schemas={sid: schema for sid, schema in plan.schemas.items()
                                      if sid in changes | emptied})
        if decision.table is not None and decision.changes(current) and kept.schemas:
            self.tables.take(table_of(topic), sink, decision.table, decision.replace,
                       decode_topic(frames, topic, kept, original))
        return kept
