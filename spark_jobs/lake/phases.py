"""Where a micro-batch's time goes, by phase (pure; the job publishes it per batch).

Phases: ``read`` (Kafka records into the batch's cache and the driver), ``decode`` (Avro to
rows), ``open`` (a table's delta-rs handles opened or brought up to date: log reads),
``merge`` (a table's MERGE and its Delta commit), ``tombstones`` (the fast path's reads and
appends of a table's tombstones), ``commit`` (the batch's own records:
dead letters, held-back changes, the cut and heartbeat state), ``maintenance`` (compaction,
tombstone expiry).

Phases nest: a phase started inside another (the maintenance a table's merge runs every
--maintenance-every batches) pauses the outer one on that thread, so each second is counted in
one phase only. Tables are merged on several threads at once, so the per-phase sums of a batch
can exceed its wall time: they say where the work went, not the critical path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

PHASES = ("read", "decode", "open", "merge", "tombstones", "commit", "maintenance")

F = TypeVar("F", bound=Callable[..., Any])


class PhaseClock:
    """Seconds per phase since the last `take`, summed over threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._seconds = dict.fromkeys(PHASES, 0.0)
        self._local = threading.local()  # this thread's open phases: [phase, started]

    def _add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self._seconds[phase] += seconds

    @contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        if phase not in self._seconds:
            raise ValueError(f"unknown phase {phase!r}: one of {', '.join(PHASES)}")
        stack: list[list[Any]] = self._local.__dict__.setdefault("stack", [])
        now = self._clock()
        if stack:  # pause the outer phase
            outer = stack[-1]
            self._add(outer[0], now - outer[1])
        stack.append([phase, now])
        try:
            yield
        finally:
            now = self._clock()
            self._add(phase, now - stack.pop()[1])
            if stack:
                stack[-1][1] = now  # the outer phase goes on from here

    def timed(self, phase: str) -> Callable[[F], F]:
        """A decorator: the whole call counts in `phase`."""
        def wrap(function: F) -> F:
            @wraps(function)
            def timed_call(*args: Any, **kwargs: Any) -> Any:
                with self.timing(phase):
                    return function(*args, **kwargs)
            return timed_call  # type: ignore[return-value]
        return wrap

    def take(self) -> dict[str, float]:
        """Every phase's seconds since the last take (0 for a phase that did not run)."""
        with self._lock:
            taken, self._seconds = self._seconds, dict.fromkeys(PHASES, 0.0)
        return taken


class InFlight:
    """Tables being written at once: how many began since the last `take`, and the most in
    flight together meanwhile (on an object store, what bounds the requests in flight)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self._began = 0
        self._peak = 0

    @contextmanager
    def table(self) -> Iterator[None]:
        with self._lock:
            self.now += 1
            self._began += 1
            self._peak = max(self._peak, self.now)
        try:
            yield
        finally:
            with self._lock:
                self.now -= 1

    def take(self) -> tuple[int, int]:
        """(tables begun, the most in flight at once) since the last take."""
        with self._lock:
            taken = self._began, self._peak
            self._began, self._peak = 0, self.now
        return taken


# One per process: the job runs one streaming query, and the sinks it calls time their own
# maintenance here without knowing about the job.
CLOCK = PhaseClock()
