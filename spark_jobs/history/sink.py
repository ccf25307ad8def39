"""A table's history table (SCD type 2, `history/versions.py`) kept up to date per
micro-batch, through delta-rs, whichever path (Spark or the fast path) applied the mirror.

Two Delta tables per table (`<target>/_pgcdc/...`, beside the tombstones, so no table name
can clash with them and `--replay`'s empty-target check ignores them):

* `history/<schema>/<table>`: the versions (row columns + `history.HISTORY_COLUMNS`), what
  users read;
* `history_log/<schema>/<table>`: every event of the table once (row columns, `_cdc_op`,
  position, `_cdc_ts_ms`, `_cdc_toast`, and `history.EVENT_KEY`: the key columns it was
  written with): what makes the history exact. Versions are not enough to recompute from: an
  in-place update (untracked columns) overwrote values a late tracked change between the two
  would need, and a late event between two versions needs the TOAST values of the one before.

Layout: the history is partitioned by `__is_current`. A version that closes moves to the
closed partition in a new file, so that partition only grows by appends (only late events,
recomputed, change closed versions); the current partition holds one row per live source
row (the mirror's size), and it is what in-order batches read and rewrite.

Per batch, the table's events fall into parts by their values in `history.shared_key` (the
columns every key the table's events were written with has; the keys seen are read from the
log once per sink): events of different parts never change the same row. Then:

1. the batch's events not yet in the log are appended to it;
2. each part is *extended* or *recomputed* (`HistorySink._fold`). Extended, the common case:
   its events of the batch all come after every logged event of the part and every logged
   truncate (bounds kept in memory, `history/positions.py`: no log read), so its versions are
   its stored current versions continued by those events (`history.versions(...,
   current=...)`). Recomputed: a part with a late, duplicate or replayed event, or with a
   version open at a late truncate (at or before the log's highest position); every
   part when the batch crashed between the two commits, when the history does not reflect
   the whole log (its `REFLECTED` transaction, committed with each history commit, is not
   the log's event count: a crash between the commits and then a new checkpoint, or a
   history written before this was kept) or when `shared_key` is empty. Its versions are
   recomputed from all its logged events and the table's truncates (`history.versions`, a
   pure function of that set) and compared with the stored ones. Both give the same
   versions (the extension invariant, tested in `test_spark_jobs_history.py`);
3. the versions opened or changed are written in one MERGE on (`__valid_from_lsn`,
   `__valid_from_txn_index`) (`history.identity`: each event opens at most one version);
   when it changes only current versions (always, unless a part was recomputed) its
   predicate names the current partition and delta-rs skips the closed partition's files.

So a batch of in-order events costs in proportion to the batch and to the current versions of the
parts it touches, not to the log or the history: measured in benchmarks/results/merge-history.md. A
batch with a truncate after the log reads the whole current partition (the truncate closes every
current version).

Column changes: new columns are added to both tables (at the end); a widened or
retyped column (`widening.column_change`, as in the mirror) rewrites both with the new type."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake import Schema as DeltaSchema
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..lake.delta_handles import DeltaHandles
from ..lake.phases import CLOCK
from ..lake.storage import is_local, local_path, options_for
from ..rules.changes import IDX, LSN, OP, TOAST, TS, EventId, Position
from ..rules.fold import event_id, key_of, position
from ..rules.plan import DATAFUSION, SOURCE, TARGET, key_condition
from ..rules.widening import column_change
from . import versions as history
from .positions import LoggedPositions
from .versions import HistoryError, Tracking

log = logging.getLogger(__name__)

HISTORY_DIR, LOG_DIR = "_pgcdc/history", "_pgcdc/history_log"
DELETE = "__pgcdc_delete"  # source-only flag of the replacing MERGE
# The history's Delta transaction whose version is how many logged events it reflects
# (committed with every history commit; see `HistorySink._fold`).
REFLECTED = "pgcdc-history-reflects-logged-events"
EVENT_META = [StructField(OP, StringType()), StructField(LSN, LongType()),
              StructField(IDX, LongType()), StructField(TS, LongType()),
              StructField(TOAST, ArrayType(StringType(), True)),
              StructField(history.EVENT_KEY, StringType())]
VERSION_META = [StructField(history.FROM_LSN, LongType()),
                StructField(history.FROM_IDX, LongType()),
                StructField(history.TO_LSN, LongType()), StructField(history.TO_IDX, LongType()),
                StructField(history.FROM_TS, TimestampType()),
                StructField(history.TO_TS, TimestampType()),
                StructField(history.CURRENT, BooleanType()), StructField(history.HOP, StringType()),
                StructField(history.TO_OP, StringType())]


def history_path(target: str, rel_path: str) -> str:
    """Where the history table of `<schema>/<table>` is (see the module doc)."""
    return f"{target.rstrip('/')}/{HISTORY_DIR}/{rel_path}"


def arrow_schema(fields: Sequence[StructField]) -> pa.Schema:
    """The Arrow schema Delta gives these Spark fields (the same for both paths)."""
    return pa.schema(DeltaSchema.from_json(StructType(list(fields)).json()).to_arrow())


def _spark_fields(table: DeltaTable) -> list[StructField]:
    return StructType.fromJson(json.loads(table.schema().to_json())).fields


def _txn(app_id: str, batch_id: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app_id=app_id, version=batch_id)])


def _done(table: DeltaTable | None, app_id: str, batch_id: int) -> bool:
    if table is None:
        return False
    version = table.transaction_version(app_id)
    return version is not None and version >= batch_id


class Folded(NamedTuple):
    """What folding a batch did: version rows written (added, changed or removed), the parts
    recomputed from the log (values of `history.shared_key`; None: the whole table) and the
    parts extended from their current versions (the fast path)."""

    written: int
    recomputed: int | None
    extended: int = 0


class HistorySink:
    """One table's history (see the module doc)."""

    def __init__(self, target: str, rel_path: str, app_id: str, tracking: Tracking,
                 maintain_every: int = 0) -> None:
        self.path = history_path(target, rel_path)
        self.log_path = f"{target.rstrip('/')}/{LOG_DIR}/{rel_path}"
        self.rel_path = rel_path
        self.app_id = app_id
        self.tracking = tracking
        self.maintain_every = maintain_every  # compact both tables every N batches (0: never)
        self.batches = 0
        self._handles = DeltaHandles()
        self._known_keys: set[tuple[str, ...]] | None = None  # see `_keys`
        # see `_log_state`; None: read them from the tables
        self._logged: LoggedPositions | None = None
        self._reflects_log = False  # the history reflects every logged event

    def _open(self, path: str) -> DeltaTable | None:
        """The delta-rs handle of `path`, up to date (`lake/delta_handles.py`); None when
        there is no table yet."""
        return self._handles.open(path)

    def exists(self) -> bool:
        """Whether the table has a history log (it had events with a key)."""
        return self._open(self.log_path) is not None

    def set_aside(self) -> None:
        """Start the history again (the upstream table was dropped and created again,
        `rules/incarnation.py`: the history, like the mirror, starts again, with the new table's
        columns and key). On local disk both tables move aside, to `<path>.replaced-<ms>`;
        in an object store, where a directory cannot move, each is overwritten empty with no
        row column (a new version: time travel still shows the old rows), and the next batch
        gives them the new table's columns."""
        stamp = time.time_ns() // 1_000_000
        self._known_keys = None
        self._logged = None
        for path, meta in ((self.log_path, EVENT_META), (self.path, VERSION_META)):
            self._handles.forget(path)
            if is_local(path):
                local = local_path(path)
                if os.path.isdir(local):
                    os.replace(local, f"{local}.replaced-{stamp}")
                continue
            table = self._open(path)
            if table is not None:
                write_deltalake(table, arrow_schema(meta).empty_table(), mode="overwrite",
                                schema_mode="overwrite",
                                partition_by=table.metadata().partition_columns or None)
            self._handles.forget(path)

    @CLOCK.timed("maintenance")
    def maintain(self) -> None:
        """Compact the log and the history (`OPTIMIZE`: same rows, fewer files; the history
        per `__is_current` partition): each batch adds a file to each."""
        for path in (self.log_path, self.path):
            table = self._open(path)
            if table is not None:
                table.optimize.compact()

    def apply(self, events: pa.Table | Sequence[Mapping[str, Any]],
              types: Mapping[str, DataType], key: Sequence[str], batch_id: int) -> Folded:
        """Fold one batch's events of the table into its history (a batch already folded:
        nothing written, nothing recomputed). `events`: the flattened changes (row columns +
        metadata, and `history.EVENT_KEY` when the batch holds several key schemas; an Arrow
        table or Python rows); `types`: the Spark type of each row column in the batch (what
        the mirror gets); `key`: the key columns of the events that do not name theirs."""
        clash = history.clashing(types)
        if clash:
            raise HistoryError(f"{self.rel_path}: column(s) {clash} clash with the history "
                               "table's own columns; leave the table out of --history")
        hist, logged = self._open(self.path), self._open(self.log_path)
        if _done(hist, f"{self.app_id}:{self.path}", batch_id):
            return Folded(0, 0)
        fields = self._reconcile(logged, hist, types)
        hist, logged = self._open(self.path), self._open(self.log_path)  # as rewritten
        if hist is not None:
            _add_columns(hist, fields)
            hist = self._partitioned(hist)
        batch = _normalize(events, arrow_schema([*fields, *EVENT_META]), history.key_label(key))
        if not batch.num_rows:
            return Folded(0, 0)
        try:
            folded = self._fold(batch, hist, logged, fields, key, batch_id)
        except BaseException:
            self._logged = None  # the log may hold what the history does not: read both again
            raise
        self.batches += 1
        if self.maintain_every and self.batches % self.maintain_every == 0:
            self.maintain()
        return folded

    def _fold(self, batch: pa.Table, hist: DeltaTable | None, logged: DeltaTable | None,
              fields: Sequence[StructField], key: Sequence[str], batch_id: int) -> Folded:
        """`apply` once the tables have the batch's columns: log, extend or recompute each
        part, one history commit (steps 1-3 of the module doc)."""
        log_app = f"{self.app_id}:{self.log_path}"
        recovering = _done(logged, log_app, batch_id)
        rows = batch.to_pylist()
        first = _first_of_each(rows)
        keys = self._keys(logged, key) | {history.event_key(r, key) for r in rows
                                          if r[OP] != "t"}
        shared = history.shared_key(keys)
        state = self._log_state(logged, hist)
        state.parted_by(shared)
        reflected = self._reflects_log
        full = recovering or not shared or not reflected
        late_truncates = {position(rows[i]) for i in first.values() if rows[i][OP] == "t"
                          and state.last is not None and position(rows[i]) <= state.last}
        after = max(late_truncates, default=None)

        def follows(r: dict[str, Any]) -> bool:
            at = position(r)
            return state.follows(key_of(r, shared), at) and (after is None or at > after)
        redo: set[tuple[Any, ...]] = set()
        if not full:
            redo = {key_of(r, shared) for r in (rows[i] for i in first.values())
                    if r[OP] != "t" and not follows(r)}
            if late_truncates:  # the parts with a version open at one of them
                redo |= {key_of(v, shared) for v in _spanning(hist, shared, late_truncates)}

        def redone(r: dict[str, Any]) -> bool:
            return full or r[OP] == "t" or key_of(r, shared) in redo

        old = (_read(logged, shared, redo, full, events=True)
               if full or redo or late_truncates else [])
        known = {event_id(r) for r in old}
        new = [i for e, i in first.items() if e not in known]
        logged_before = state.events
        if new and not recovering:
            write_deltalake(self.log_path, batch.take(new), mode="append", schema_mode="merge",
                            commit_properties=_txn(log_app, batch_id),
                            storage_options=options_for(self.log_path))
            state.logged((None if rows[i][OP] == "t" else key_of(rows[i], shared),
                          position(rows[i])) for i in new)
        self._known_keys = keys
        columns = [f.name for f in fields]
        version_schema = arrow_schema([*fields, *VERSION_META])
        changes: list[pa.Table] = []
        only_current = True
        if full or redo:
            recomputed = history.versions([*old, *(rows[i] for i in new if redone(rows[i]))],
                                          key, columns, self.tracking)
            stored = _read(hist, shared, redo, full, events=False)
            table, only_current = _differences(stored, recomputed, version_schema)
            changes.append(table)
        extending = [] if full else [
            rows[i] for i in first.values()
            if (position(rows[i]) not in late_truncates if rows[i][OP] == "t"
                else not redone(rows[i]))]
        parts = {key_of(r, shared) for r in extending if r[OP] != "t"}
        if extending:
            everything = any(r[OP] == "t" for r in extending)
            current = [v for v in _current(hist, shared, None if everything else parts)
                       if key_of(v, shared) not in redo]
            extended = history.versions(extending, key, columns, self.tracking, current)
            changes.append(_flagged(pa.Table.from_pylist(
                [_timestamps(v) for v in extended], schema=version_schema), False))
        source = pa.concat_tables(changes) if changes else _flagged(
            version_schema.empty_table(), False)
        if source.num_rows or state.events != logged_before or not reflected:
            self._commit(hist, source, only_current, CommitProperties(app_transactions=[
                Transaction(app_id=f"{self.app_id}:{self.path}", version=batch_id),
                Transaction(app_id=REFLECTED, version=state.events)]))
        self._reflects_log = True
        return Folded(source.num_rows, None if full else len(redo), len(parts))

    def _log_state(self, logged: DeltaTable | None, hist: DeltaTable | None
                   ) -> LoggedPositions:
        """The log's positions (`history/positions.py`), read from the log once per sink (its
        op and position columns) and then kept by each batch; with whether the history
        reflects every logged event (its `REFLECTED` transaction)."""
        if self._logged is None:
            last = truncated = None
            count = 0
            if logged is not None:
                at = logged.to_pyarrow_dataset().to_table(columns=[OP, LSN, IDX])
                count = at.num_rows
                last = _highest(at)
                truncated = _highest(at.filter(pc.equal(at.column(OP), "t")))
            self._logged = LoggedPositions(last, count, truncated)
            reflected = hist.transaction_version(REFLECTED) if hist is not None else None
            self._reflects_log = (reflected or 0) == count
            if not self._reflects_log:
                log.info("%s: the history reflects %s of the %d logged event(s): the next "
                         "batch recomputes it whole", self.rel_path, reflected, count)
        return self._logged

    def _partitioned(self, hist: DeltaTable) -> DeltaTable:
        """The history partitioned by `__is_current`: a table written before it was rewritten
        so, once (same rows, same transactions)."""
        if hist.metadata().partition_columns == [history.CURRENT]:
            return hist
        write_deltalake(hist, hist.to_pyarrow_table(), mode="overwrite",
                        partition_by=[history.CURRENT], schema_mode="overwrite")
        log.info("%s: history table rewritten partitioned by %s", self.rel_path,
                 history.CURRENT)
        table = self._open(self.path)
        assert table is not None
        return table

    def _keys(self, logged: DeltaTable | None, default: Sequence[str]
              ) -> set[tuple[str, ...]]:
        """The key columns of the logged events (`history.EVENT_KEY`; `default` for those
        logged without), read from the log once per sink and then kept up to date."""
        if self._known_keys is None:
            self._known_keys = set()
            if logged is not None:
                dataset = logged.to_pyarrow_dataset()
                if history.EVENT_KEY in dataset.schema.names:
                    rows = dataset.to_table(columns=[history.EVENT_KEY],
                                            filter=pc.field(OP) != "t")
                    labels = pc.unique(rows.column(history.EVENT_KEY)).to_pylist()
                else:
                    labels = [None] if dataset.count_rows(filter=pc.field(OP) != "t") else []
                self._known_keys = {history.event_key({history.EVENT_KEY: label}, default)
                                    for label in labels}
        return set(self._known_keys)

    def _reconcile(self, logged: DeltaTable | None, hist: DeltaTable | None,
                   types: Mapping[str, DataType]) -> list[StructField]:
        """The row columns of the history: the logged ones (with the types a widening or
        retype gives them, both tables rewritten once), then the batch's new ones."""
        have = [f for f in _spark_fields(logged) if f.name not in {m.name for m in EVENT_META}] \
            if logged is not None else []
        changed: dict[str, DataType] = {}
        for f in have:
            if f.name in types:
                change, new = column_change(f.dataType, types[f.name])
                if change != "same":
                    changed[f.name] = new
        if changed:
            for table in (logged, hist):
                if table is not None:
                    _rewrite(table, changed)
            log.info("%s: history columns retyped %s", self.rel_path,
                     {c: t.simpleString() for c, t in changed.items()})
        out = [StructField(f.name, changed.get(f.name, f.dataType)) for f in have]
        names = {f.name for f in out}
        out += [StructField(c, t) for c, t in types.items() if c not in names]
        return out

    def _commit(self, hist: DeltaTable | None, source: pa.Table, only_current: bool,
                txn: CommitProperties) -> None:
        """Apply `source` (version rows flagged `DELETE` or not) to the history in one commit
        carrying `txn` (an empty one when there is nothing to change: the transactions still
        record the batch). The MERGE names a version by `history.identity`; with
        `only_current` (no closed version changes) its predicate names the current partition,
        so delta-rs reads and rewrites only that partition's files: closed versions are only
        ever added, in files of their own."""
        if hist is None:
            write_deltalake(self.path, source.drop_columns([DELETE]), mode="append",
                            partition_by=[history.CURRENT], commit_properties=txn,
                            storage_options=options_for(self.path))
            log.info("%s: history table at %s", self.rel_path, self.path)
            return
        if not source.num_rows:
            write_deltalake(hist, source.drop_columns([DELETE]), mode="append",
                            commit_properties=txn)
            return
        quote = DATAFUSION.quote
        condition = key_condition([history.FROM_LSN, history.FROM_IDX], dialect=DATAFUSION)
        if only_current:
            condition += f" AND {TARGET}.{quote(history.CURRENT)} = true"
        values = {quote(c): f"{SOURCE}.{quote(c)}" for c in source.column_names if c != DELETE}
        (hist.merge(source, condition, source_alias=SOURCE, target_alias=TARGET,
                    streamed_exec=False, commit_properties=txn)
         .when_matched_delete(f"{SOURCE}.{quote(DELETE)}")
         .when_matched_update(values, f"NOT {SOURCE}.{quote(DELETE)}")
         .when_not_matched_insert(values, f"NOT {SOURCE}.{quote(DELETE)}")
         .execute())


def _highest(positions: pa.Table) -> Position | None:
    """The highest (LSN, index) of a table of positions (None: empty)."""
    if not positions.num_rows:
        return None
    lsn = pc.max(positions.column(LSN)).as_py()
    at = positions.filter(pc.equal(positions.column(LSN), lsn))
    return Position(lsn, pc.max(at.column(IDX)).as_py())


def _first_of_each(rows: Sequence[dict[str, Any]]) -> dict[EventId, int]:
    """The index of each event's first row, in event order (`history.dedupe`)."""
    first: dict[EventId, int] = {}
    for i, r in enumerate(rows):
        first.setdefault(event_id(r), i)
    return {e: first[e] for e in sorted(first)}


def _differences(stored: list[dict[str, Any]], computed: list[dict[str, Any]],
                 schema: pa.Schema) -> tuple[pa.Table, bool]:
    """The rows making the `stored` versions of some parts the `computed` ones (flagged
    `DELETE` for those to remove), and whether only current stored versions change."""
    computed = pa.Table.from_pylist([_timestamps(v) for v in computed],
                                    schema=schema).to_pylist()  # the stored form
    by_id = {history.identity(v): v for v in stored}
    changed = [v for v in computed if by_id.get(history.identity(v)) != v]
    ids = {history.identity(v) for v in computed}
    gone = [v for i, v in by_id.items() if i not in ids]
    only_current = all(by_id[history.identity(v)][history.CURRENT] for v in changed
                       if history.identity(v) in by_id) and all(
        v[history.CURRENT] for v in gone)
    return pa.concat_tables([_flagged(pa.Table.from_pylist(changed, schema=schema), False),
                             _flagged(pa.Table.from_pylist(gone, schema=schema), True)]
                            ), only_current


def _flagged(versions: pa.Table, delete: bool) -> pa.Table:
    return versions.append_column(pa.field(DELETE, pa.bool_()),
                                  pa.array([delete] * versions.num_rows, pa.bool_()))


def _normalize(events: pa.Table | Sequence[Mapping[str, Any]], schema: pa.Schema,
               label: str) -> pa.Table:
    """The batch's events as an Arrow table of the log's schema (the Spark path hands an
    Arrow table of Spark's types, the fast path Python rows): the same values either way;
    `label` (`history.key_label`) names the key of the events that name none."""
    if not isinstance(events, pa.Table):
        table = pa.Table.from_pylist(list(events), schema=schema)  # absent keys: NULL
    else:
        table = pa.Table.from_arrays(
            [events.column(f.name).cast(f.type) if f.name in events.column_names
             else pa.nulls(len(events), f.type) for f in schema], schema=schema)
    at = schema.get_field_index(history.EVENT_KEY)
    return table.set_column(at, schema.field(at),
                            pc.fill_null(table.column(at), pa.scalar(label, pa.string())))


def _timestamps(version: dict[str, Any]) -> dict[str, Any]:
    """Commit times: epoch ms in `history`, microseconds for Arrow's timestamp[us]."""
    return {**version, **{c: None if version[c] is None else version[c] * 1000
                          for c in (history.FROM_TS, history.TO_TS)}}


def _read(table: DeltaTable | None, key: Sequence[str], keys: set[tuple[Any, ...]],
          everything: bool, events: bool) -> list[dict[str, Any]]:
    """The rows of `keys` (and, in the log, every truncate), or all rows."""
    if table is None or (not keys and not everything and not events):
        return []
    dataset = table.to_pyarrow_dataset()
    if everything:
        every: list[dict[str, Any]] = dataset.to_table().to_pylist()
        return every
    wanted = _key_filter(dataset.schema, key, keys)
    if events:
        truncates = pc.field(OP) == "t"
        wanted = truncates if not keys else (wanted | truncates if wanted is not None else None)
    rows = (dataset.to_table(filter=wanted) if wanted is not None else dataset.to_table()
            ).to_pylist()
    return [r for r in rows if (events and r[OP] == "t") or key_of(r, key) in keys]


def _current(table: DeltaTable | None, key: Sequence[str], keys: set[tuple[Any, ...]] | None
             ) -> list[dict[str, Any]]:
    """The current versions of `keys` (values of `key`; None: all), read from the current
    partition only, in `history/versions.py`'s form (commit times in epoch ms)."""
    if table is None or keys == set():
        return []
    dataset = table.to_pyarrow_dataset()
    wanted = pc.field(history.CURRENT) == pa.scalar(True)
    narrower = None if keys is None else _key_filter(dataset.schema, key, keys)
    data = dataset.to_table(filter=wanted if narrower is None else wanted & narrower)
    for c in (history.FROM_TS, history.TO_TS):
        at = data.schema.get_field_index(c)
        data = data.set_column(at, c, pc.divide(data.column(c).cast(pa.int64()), 1000))
    rows: list[dict[str, Any]] = data.to_pylist()
    return rows if keys is None else [r for r in rows if key_of(r, key) in keys]


def _key_filter(schema: pa.Schema, key: Sequence[str], keys: set[tuple[Any, ...]]
                ) -> pc.Expression | None:
    """A filter keeping (at least) the rows of `keys` by their first column, when its values
    are plain integers or strings (None: none; the caller checks every row)."""
    first = [k[0] for k in keys]
    if first and key[0] in schema.names and all(
            isinstance(v, (int, str)) and not isinstance(v, bool) for v in first):
        return pc.field(key[0]).isin(pa.array(first, schema.field(key[0]).type))
    return None


def _spanning(table: DeltaTable | None, shared: Sequence[str],
              truncates: set[Position]) -> list[dict[str, Any]]:
    """The `shared` columns of the stored versions open at one of the `truncates` (opened
    before it, closed after it or still open): the only versions a truncate the history does
    not reflect yet changes (it closes them). None when it does: a copy already applied."""
    if table is None:
        return []
    from_lsn, from_idx = pc.field(history.FROM_LSN), pc.field(history.FROM_IDX)
    to_lsn, to_idx = pc.field(history.TO_LSN), pc.field(history.TO_IDX)
    wanted = None
    for lsn, idx in truncates:
        before = (from_lsn < lsn) | ((from_lsn == lsn) & (from_idx < idx))
        after = to_lsn.is_null() | (to_lsn > lsn) | ((to_lsn == lsn) & (to_idx > idx))
        wanted = before & after if wanted is None else wanted | (before & after)
    rows: list[dict[str, Any]] = table.to_pyarrow_dataset().to_table(
        columns=list(shared), filter=wanted).to_pylist()
    return rows


def _add_columns(table: DeltaTable, fields: Sequence[StructField]) -> None:
    """Add the row columns the history table lacks (at the end: a table that saw a column
    appear later has it after the history columns; read columns by name)."""
    have = {f.name for f in _spark_fields(table)}
    missing = [f for f in fields if f.name not in have]
    if missing:
        table.alter.add_columns(DeltaSchema.from_json(StructType(missing).json()).fields)


def _rewrite(table: DeltaTable, types: Mapping[str, DataType]) -> None:
    """Rewrite a history or log table with columns converted to new types (NULL where a
    value does not convert), in one commit."""
    fields = [StructField(f.name, types.get(f.name, f.dataType)) for f in _spark_fields(table)]
    schema = arrow_schema(fields)
    data = table.to_pyarrow_table()
    columns = [_cast(data.column(f.name), f.type) for f in schema]
    write_deltalake(table, pa.Table.from_arrays(columns, schema=schema), mode="overwrite",
                    schema_mode="overwrite",
                    partition_by=table.metadata().partition_columns or None)


def _cast(column: pa.ChunkedArray, type_: pa.DataType) -> pa.ChunkedArray | pa.Array:
    try:
        return column.cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for value in column.to_pylist():
            try:
                out.append(pa.array([value]).cast(type_)[0].as_py())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                out.append(None)
        return pa.array(out, type_)
