"""Where a history's event log ends, per part (`history.shared_key` values), kept in memory by
the sink between batches so that it can tell, without reading the log, which parts of a
batch continue their logged events (extended from their current versions) and which have a
late event (recomputed from the log). Pure: no Delta, no Spark.

The invariant: `bound(part)` is at or after the position of every logged event of `part`,
and `truncate_bound` at or after every logged truncate. Exact for the parts logged in the
last `RECENT_BATCHES` batches (so an event that is only late against *another* part's
events, as those of a Kafka partition read a little behind the other's, does not count as
late); for the others it is `floor`, the highest position of the batches no longer kept (at
first, the whole log's highest position), which bounds memory by the parts of a few
batches."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from ..rules.changes import Position

RECENT_BATCHES = 4


@dataclass
class LoggedPositions:
    """What the sink knows of the log: `last`, its highest position (None: empty); `events`,
    how many it holds; `truncate_bound`; `floor` and the recent batches' parts (see the
    module doc), valid for parts by `shared` (other parts: everything counts as at `floor`)."""

    last: Position | None
    events: int
    truncate_bound: Position | None
    shared: tuple[str, ...] = ()
    floor: Position | None = None
    recent: list[dict[Hashable, Position]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.floor = self.last

    def bound(self, part: Hashable) -> Position | None:
        """A position at or after every logged event of `part` (None: nothing logged)."""
        for batch in reversed(self.recent):
            if part in batch:
                return batch[part]
        return self.floor

    def follows(self, part: Hashable, at: Position) -> bool:
        """Whether an event of `part` at `at` comes after every logged event of its part and
        every logged truncate."""
        return all(b is None or at > b for b in (self.bound(part), self.truncate_bound))

    def parted_by(self, shared: Iterable[str]) -> None:
        """Parts are now the values of `shared`: when that changed, the recent parts no
        longer name parts, and every part is bounded by the log's highest position."""
        shared = tuple(shared)
        if shared != self.shared:
            self.shared, self.recent, self.floor = shared, [], self.last

    def logged(self, events: Iterable[tuple[Hashable | None, Position]]) -> None:
        """Record a batch's newly logged events: (part, position), part None for a truncate."""
        batch: dict[Hashable, Position] = {}
        for part, at in events:
            self.events += 1
            self.last = at if self.last is None else max(self.last, at)
            if part is None:
                self.truncate_bound = at if self.truncate_bound is None else max(
                    self.truncate_bound, at)
            else:  # never below what the log held of the part before: a late event
                before = batch.get(part) or self.bound(part)
                batch[part] = at if before is None else max(before, at)
        self.recent.append(batch)
        if len(self.recent) > RECENT_BATCHES:
            dropped = self.recent.pop(0)
            self.floor = max([*([self.floor] if self.floor else []), *dropped.values()],
                             default=None)
