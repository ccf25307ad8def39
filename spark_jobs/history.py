"""History tables (SCD type 2): the versions of each source row, computed from the set of its
change events. Pure: plain functions over Python rows (dicts), no Spark, no Delta.

A version is one state of one row (one key) over a span of source positions
``[valid_from, valid_to)``, where a position is ``(commit_lsn, txn_index)``. The versions of a
key are a function of the *set* of the table's events: events are ordered by position, not by
arrival, and an event seen twice (same position) counts once, so late events, duplicates,
restarts and replays give the same versions (`versions` sorts and deduplicates first).

Rules, walking a key's events in position order, with the table's truncates among them:

* an insert, update or snapshot read (`c`, `u`, `r`) gives the row image: its columns, where a
  column named in the event's unchanged-TOAST list takes the previous image's value (NULL when
  the key had no image: never seen, or deleted/truncated since). When no version of the key is
  open, the image opens one. When one is open and the image differs from it in a *tracked*
  column, the open version closes at the event's position and the image opens the next one;
  when it differs in untracked columns only (or in none: a snapshot re-read, an update that
  set the same values), the open version takes the image **in place** (its `valid_from` and
  `__op` stay). Tracked columns: every non-key column, or those `Tracking` names.
* a delete closes the open version at its position (no delete-marker row: a deleted row is a
  version with `__valid_to_op = 'd'` and no successor); the image is forgotten.
* a truncate closes every version open at its position (`__valid_to_op = 't'`), whichever
  batch brought it: a late event older than the truncate is closed by it.
* a primary-key change arrives as a delete of the old key and an insert of the new one: the
  old key's version closes, the new key's opens.

The columns of a version are the table's row columns (all the events' columns: one added
later is NULL in older versions, one dropped upstream is NULL in versions opened after the
drop), plus `HISTORY_COLUMNS`. `as_of` is the point-in-time rule: the versions whose span
holds a position."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .changes import IDX, LSN, OP, TOAST, TS, Position
from .fold import key_of, position

Row = dict[str, Any]

FROM_LSN, FROM_IDX = "__valid_from_lsn", "__valid_from_txn_index"
TO_LSN, TO_IDX = "__valid_to_lsn", "__valid_to_txn_index"
FROM_TS, TO_TS = "__valid_from", "__valid_to"  # commit times (epoch ms here; timestamps in Delta)
CURRENT, HOP, TO_OP = "__is_current", "__op", "__valid_to_op"
HISTORY_COLUMNS = (FROM_LSN, FROM_IDX, TO_LSN, TO_IDX, FROM_TS, TO_TS, CURRENT, HOP, TO_OP)
_INF = 1 << 63


class HistoryError(ValueError):
    """A table whose history cannot be kept as asked (one line, names the table)."""


@dataclass(frozen=True)
class Tracking:
    """Which columns open a new version when they change (`--history-columns` /
    `--history-except-columns`): `only` (when not None) or every column but `excluded`.
    Names are the table's column names, compared ignoring case; key columns never count
    (they do not change within a key's history)."""

    only: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()

    @classmethod
    def of(cls, only: Iterable[str] = (), excluded: Iterable[str] = ()) -> Tracking:
        only_, excluded_ = frozenset(c.lower() for c in only), frozenset(
            c.lower() for c in excluded)
        if only_ and excluded_:
            raise ValueError("give --history-columns or --history-except-columns, not both")
        return cls(only_ or None, excluded_)

    def tracked(self, columns: Iterable[str], key: Sequence[str]) -> list[str]:
        keys = {k.lower() for k in key}
        return [c for c in columns if c.lower() not in keys and c.lower() not in self.excluded
                and (self.only is None or c.lower() in self.only)]


ALL = Tracking()


def dedupe(events: Iterable[Row]) -> list[Row]:
    """The events once each, ordered by position (one event per position in a table: the
    copies of a truncate, one per Kafka partition, share theirs)."""
    seen: dict[Position, Row] = {}
    for e in events:
        seen.setdefault(position(e), e)
    return [seen[p] for p in sorted(seen)]


def versions(events: Iterable[Row], key: Sequence[str], columns: Sequence[str],
             tracking: Tracking = ALL) -> list[Row]:
    """Every version of every key the events name (see the module doc for the rules).
    `events`: flattened changes (row columns + `_cdc_op`, position, `_cdc_ts_ms`,
    `_cdc_toast`), in any order, duplicates allowed; they must include every event of the
    keys concerned and every truncate of the table. `columns`: the row columns the versions
    get (an event lacking one has NULL there)."""
    ordered = dedupe(events)
    truncates = [e for e in ordered if e[OP] == "t"]
    by_key: dict[tuple[Any, ...], list[Row]] = {}
    for e in ordered:
        if e[OP] != "t":
            by_key.setdefault(key_of(e, key), []).append(e)
    tracked = tracking.tracked(columns, key)
    out: list[Row] = []
    for changes in by_key.values():
        merged = sorted([*changes, *truncates], key=position)
        out.extend(_chain(merged, columns, tracked))
    return out


def _chain(events: Sequence[Row], columns: Sequence[str], tracked: Sequence[str]
           ) -> list[Row]:
    """One key's versions from its events and the table's truncates, in position order."""
    out: list[Row] = []
    image: Row | None = None  # the row as of the last event walked (None: no row)
    current: Row | None = None  # the open version
    for e in events:
        op = e[OP]
        if op in ("d", "t"):
            if current is not None:
                _close(current, e)
            current = image = None
            continue
        toast = set(e.get(TOAST) or ())
        new = {c: (image.get(c) if image is not None else None) if c in toast else e.get(c)
               for c in columns}
        if current is not None and all(key_of(new, [c]) == key_of(current, [c])
                                       for c in tracked):
            current.update(new)  # in place: untracked columns only
        else:
            if current is not None:
                _close(current, e)
            current = {**new, FROM_LSN: e[LSN], FROM_IDX: e[IDX], TO_LSN: None, TO_IDX: None,
                       FROM_TS: e[TS], TO_TS: None, CURRENT: True, HOP: op, TO_OP: None}
            out.append(current)
        image = new
    return out


def _close(version: Row, event: Row) -> None:
    version.update({TO_LSN: event[LSN], TO_IDX: event[IDX], TO_TS: event[TS], CURRENT: False,
                    TO_OP: event[OP]})


def valid_from(version: Row) -> Position:
    return Position(version[FROM_LSN], version[FROM_IDX])


def valid_to(version: Row) -> Position:
    """The end of a version's span; beyond every position while it is current."""
    if version[TO_LSN] is None:
        return Position(_INF, _INF)
    return Position(version[TO_LSN], version[TO_IDX])


def as_of(history: Iterable[Row], at: Position) -> list[Row]:
    """The versions valid at position `at`: ``valid_from <= at < valid_to``. As of an LSN
    (every transaction committed at or before it): ``at = (lsn, 2**63 - 1)``."""
    return [v for v in history if valid_from(v) <= at < valid_to(v)]


def at_lsn(lsn: int) -> Position:
    """The position that ends commit LSN `lsn`: as of it, every change of transactions
    committed at or before `lsn` is visible, none of a later one."""
    return Position(lsn, _INF - 1)


def as_of_sql(lsn: int, txn_index: int | None = None) -> str:
    """SQL predicate (Spark and DataFusion) selecting the versions valid at an LSN (every
    transaction committed at or before it) or at an exact position (lsn, txn_index)."""
    if txn_index is None:
        return f"{FROM_LSN} <= {int(lsn)} AND ({TO_LSN} IS NULL OR {TO_LSN} > {int(lsn)})"
    lsn, idx = int(lsn), int(txn_index)
    return (f"({FROM_LSN} < {lsn} OR ({FROM_LSN} = {lsn} AND {FROM_IDX} <= {idx})) AND "
            f"({TO_LSN} IS NULL OR {TO_LSN} > {lsn} OR ({TO_LSN} = {lsn} AND {TO_IDX} > {idx}))")


def as_of_time_sql(timestamp: str) -> str:
    """SQL predicate selecting the versions valid at a commit time (a timestamp literal such
    as ``'2026-03-03 00:00:00'`` or an expression): opened at or before it, closed after."""
    return f"{FROM_TS} <= {timestamp} AND ({TO_TS} IS NULL OR {TO_TS} > {timestamp})"


def identity(version: Row, key: Sequence[str]) -> tuple[Any, ...]:
    """What names a version in the history table: its key and where it starts."""
    return (*key_of(version, key), version[FROM_LSN], version[FROM_IDX])


def clashing(columns: Iterable[str]) -> list[str]:
    """Row columns whose names the history columns take (ignoring case)."""
    taken = {h.lower() for h in HISTORY_COLUMNS}
    return [c for c in columns if c.lower() in taken]
