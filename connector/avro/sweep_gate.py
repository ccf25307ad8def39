"""What may be confirmed to PostgreSQL, given the registry's id sweeps (issue 24).

The registry watch (connector/avro/registry.py) re-checks every few seconds that each schema id
this process registered still resolves, and stops pgcdc when one was hard-deleted. Between the
deletion and the sweep that sees it, the loop goes on publishing with the dead id: those
records cannot be decoded. If their WAL were confirmed to PostgreSQL they would be lost for
good; if not, the restart after the stop (which registers the schema again under a new id)
re-sends them. So the flush LSN sent to PostgreSQL is also bounded by this gate:

    gate.offer(flush)         # main loop: a position whose every event Kafka acknowledged
    sample = gate.sample()    # a sweep, first thing: the newest position offered so far
    ... every id registered so far resolves ...
    gate.passed(sample)       # only then does `sample` become confirmable
    gate.limit(flush)         # main loop: min(flush, the newest passed sample)

Why this is enough. Take an event E published with id X after X was deleted, and a sweep S
that passed with sample W >= E's position; we show S cannot exist. W was offered by the main
loop before S began (`sample` returns what was offered), and a position is offered only once
every event up to it was acknowledged by Kafka; so E was published before S began. X was
registered (added to the registry's id table) before E was encoded with it, so S -- which
copies the id table after taking its sample -- checks X. It asks after S began, hence after E
was published, hence after X was deleted: X answers 404, and S does not pass. (A soft-deleted
id that still resolves keeps its records decodable: not a deletion for us.)
Hence nothing at or past E is ever confirmed, neither by S nor by any later sweep (each later
sweep still checks X, and the watch stops at the first 404). An id deleted after S read it is
not S's business: the events before S's sample were all published while X still existed
(above), and whatever is published with X from then on lies past S's sample, and is confirmed
only by a later sweep that passes -- which would have to see X resolve after that publication.
The idle case is no exception: `Pipeline._confirmable` offers the server's position when
nothing is in flight, i.e. when every event before it was acknowledged.

Costs: the hot path only writes and reads an int under a lock once per loop iteration (not per
event); confirmation lags Kafka's acknowledgements by about one sweep interval plus the sweep's
duration. A sweep that cannot reach the registry vouches for nothing: confirmation pauses
(the stream goes on; WAL is retained) until a sweep passes again. A sweep that finds an id
gone `fail`s the gate: it never vouches again in this process (pgcdc is stopping).
"""

from __future__ import annotations

import threading

__all__ = ["SweepGate"]


class SweepGate:
    """Confirmable positions vouched for by registry sweeps (thread-safe; see module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offered: int | None = None
        self._vouched: int | None = None
        self._failed = False

    def start(self, confirmed: int | None) -> None:
        """A session starts at the slot's confirmed position: it was confirmed already (by an
        earlier sweep, process or the initial snapshot), so it needs no sweep of ours."""
        if confirmed is None:
            return
        with self._lock:
            if self._vouched is None or confirmed > self._vouched:
                self._vouched = confirmed
            if self._offered is None or confirmed > self._offered:
                self._offered = confirmed

    def offer(self, position: int) -> None:
        """The main loop: every event before `position` was acknowledged by Kafka."""
        with self._lock:
            if self._offered is None or position > self._offered:
                self._offered = position

    def sample(self) -> int | None:
        """A sweep's first step: what it will vouch for if every id resolves."""
        with self._lock:
            return self._offered

    def passed(self, sample: int | None) -> None:
        """Every id registered when the sweep began resolved: `sample` is confirmable."""
        with self._lock:
            if self._failed or sample is None:
                return
            if self._vouched is None or sample > self._vouched:
                self._vouched = sample

    def fail(self) -> None:
        """A sweep found an id gone: nothing more is ever vouched for."""
        with self._lock:
            self._failed = True

    @property
    def vouched(self) -> int | None:
        with self._lock:
            return self._vouched

    def limit(self, position: int) -> int:
        """`position`, lowered to the newest passed sample (0 before any)."""
        with self._lock:
            vouched = self._vouched or 0
        return position if position <= vouched else vouched
