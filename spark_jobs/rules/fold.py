"""The batch logic of `changes` and `plan.not_deleted_later` over Python rows (dicts), for the
fast path (`delta/delta_rs_writer`): the same rules, stated once in those modules'
docstrings, checked equal by a test running both over random batches.

Keys compare as Spark compares them: NULL equals NULL (the MERGE's null-safe equality),
-0.0 equals 0.0, NaN equals NaN."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from .changes import IDX, LSN, OP, TOAST, EventId, Position, truncate_position

Row = dict[str, Any]


def position(row: Row) -> Position:
    return Position(row[LSN], row[IDX])


def event_id(row: Row) -> EventId:
    """`changes.EventId` of a change: its position, the delete of a key change first."""
    return EventId(row[LSN], row[IDX], 0 if row[OP] == "d" else 1)


# Key values that compare in Python as Spark compares them, hashed as they are (the usual
# keys: tested first, as a batch computes a key per change).
_AS_IS = frozenset({int, str, bytes, bool, type(None)})


def _comparable(value: Any) -> Any:
    """A hashable stand-in for a key value with Spark's equality."""
    if type(value) in _AS_IS:
        return value
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value + 0.0  # -0.0 + 0.0 == 0.0
    if isinstance(value, list):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _comparable(v)) for k, v in value.items()))
    return value


def key_of(row: Row, key: Sequence[str]) -> tuple[Any, ...]:
    if len(key) == 1:
        return (_comparable(row[key[0]]),)
    return tuple(_comparable(row[k]) for k in key)


def after_position(rows: Iterable[Row], cut: Position | None) -> list[Row]:
    """`changes.after_position`: the changes strictly after a truncate."""
    return [r for r in rows if cut is None or position(r) > cut]


def truncate_cut(rows: Iterable[Row], cut: Position | None) -> Position | None:
    """Where a table stands cut after a batch (`changes.truncate_position`): its cut so far
    `cut` or the batch's last truncate, whichever is later. A truncate is a cut in the table's
    events: every row and tombstone before it goes (`changes.before_position`), and of the
    batch only the changes after it apply (`row_changes`), in order, as after a delete-all at
    its position; a truncate at or before the cut so far changes nothing."""
    return truncate_position([cut, *(position(r) for r in rows if r[OP] == "t")])


def row_changes(rows: Iterable[Row], cut: Position | None) -> list[Row]:
    """`changes.row_changes` after `changes.after_position`: the batch's changes the table
    cut at `cut` still applies (no truncate: they are placed by `truncate_cut`)."""
    return [r for r in after_position(rows, cut) if r[OP] != "t"]


def latest_per_key(rows: Iterable[Row], key: Sequence[str], toast: Iterable[str] = ()
                   ) -> list[Row]:
    """`changes.latest_per_key`: the last change per key by position; a column in `toast`
    takes its value from the key's last change (up to the winner) that carried it, and stays
    named in `_cdc_toast` only when none did."""
    toast = [c for c in dict.fromkeys(toast) if c not in key]
    if not toast:  # the last change per key, in one pass (ties: the last to arrive, as below)
        last: dict[tuple[Any, ...], Row] = {}
        for row in rows:
            k = key_of(row, key)
            held = last.get(k)
            if held is None or (row[LSN], row[IDX]) >= (held[LSN], held[IDX]):
                last[k] = row
        return list(last.values())
    by_key: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        by_key.setdefault(key_of(row, key), []).append(row)
    out = []
    for changes in by_key.values():
        changes.sort(key=position)
        winner = changes[-1]
        columns = [c for c in dict.fromkeys(toast) if c in winner and c not in key]
        if not columns:
            out.append(winner)
            continue
        row = dict(winner)
        unchanged = []
        for c in columns:
            carrier = next((r for r in reversed(changes) if c not in (r[TOAST] or ())), None)
            row[c] = None if carrier is None else carrier[c]
            if carrier is None:
                unchanged.append(c)
        row[TOAST] = unchanged
        out.append(row)
    return out


def not_deleted_later(rows: Iterable[Row], tombstones: Iterable[Row], key: Sequence[str],
                      other_keys: Sequence[str] = ()) -> list[Row]:
    """`plan.not_deleted_later` as a filter: drops a change when a tombstone of its key is at
    or after it (a tombstone's column of another key, when not NULL, must match too)."""
    latest: dict[tuple[Any, ...], list[Row]] = {}
    for t in tombstones:
        latest.setdefault(key_of(t, key), []).append(t)

    def deleted_later(row: Row) -> bool:
        return any(position(t) >= position(row)
                   and all(t[c] is None or _comparable(t[c]) == _comparable(row[c])
                           for c in other_keys)
                   for t in latest.get(key_of(row, key), ()))
    return [r for r in rows if not deleted_later(r)]


def newest_tombstones(tombstones: Iterable[Row], key: Sequence[str]) -> list[Row]:
    """One tombstone per key, the newest: `not_deleted_later` gives the same answer with it
    alone. `key`: every column of the tombstones but the position (the keys of all key
    schemas the table had, NULL where a tombstone was written under another)."""
    newest: dict[tuple[Any, ...], Row] = {}
    for t in tombstones:
        k = key_of(t, key)
        if k not in newest or position(t) > position(newest[k]):
            newest[k] = t
    return list(newest.values())


def deletes(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if r[OP] == "d"]
