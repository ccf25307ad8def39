"""The table a consumer rebuilds from change events (Avro values of the event contract:
op, before, after, source), keyed by its primary key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def fold(values: Iterable[dict[str, Any]], key: str | Sequence[str] = "id"
         ) -> dict[Any, dict[str, Any]]:
    """Apply events in the order given: a snapshot read, insert or update upserts its `after`
    (an update that changed the key removes the old key first), a delete removes its
    `before`'s key, a truncate empties the table. Rows are keyed by the `key` column's value,
    or by the tuple of the `key` columns' values when it names several."""

    def key_of(row: dict[str, Any]) -> Any:
        return row[key] if isinstance(key, str) else tuple(row[c] for c in key)

    state: dict[Any, dict[str, Any]] = {}
    for value in values:
        op = value["op"]
        if op in ("r", "c", "u"):
            if value["before"] is not None and key_of(value["before"]) != key_of(value["after"]):
                state.pop(key_of(value["before"]), None)
            state[key_of(value["after"])] = value["after"]
        elif op == "d":
            state.pop(key_of(value["before"]), None)
        elif op == "t":
            state.clear()
    return state


def final_state(values: Iterable[dict[str, Any]], key: str | Sequence[str] = "id"
                ) -> dict[Any, dict[str, Any]]:
    """The table once every event is applied in contract order (source.commit_lsn,
    source.txn_index), whatever order they were read in."""
    ordered = sorted(values, key=lambda v: (v["source"]["commit_lsn"], v["source"]["txn_index"]))
    return fold(ordered, key)
