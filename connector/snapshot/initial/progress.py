"""Snapshot progress per table: rows, rows/s and an ETA from ``pg_class.reltuples``.

On a terminal (stderr is a TTY) one line per table being read is redrawn in place; a table's
final line stays when it is done. Otherwise (logs, systemd, containers) a log line per table in
progress every `log_interval_s` seconds, and one when a table is done.

Readers call `add` (thread-safe); the coordinating thread calls `render` now and then.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Progress", "TableProgress", "format_line"]

log = logging.getLogger(__name__)

_BAR = 20


@dataclass
class TableProgress:
    name: str
    estimate: int | None  # pg_class.reltuples; None: unknown
    chunks: int  # chunks left
    rows: int = 0
    started: float | None = None
    finished: float | None = None

    def rate(self, now: float) -> float:
        if self.started is None:
            return 0.0
        elapsed = (now if self.finished is None else self.finished) - self.started
        return self.rows / elapsed if elapsed > 0 else 0.0


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def format_line(table: TableProgress, now: float) -> str:
    """One table's progress line (pure)."""
    rate = table.rate(now)
    if table.finished is not None:
        took = table.finished - (table.finished if table.started is None else table.started)
        return (f"snapshot {table.name}: {table.rows:,} rows in {_duration(took)} "
                f"({rate:,.0f} rows/s) done")
    if table.estimate:
        fraction = min(table.rows / table.estimate, 1.0)
        filled = int(fraction * _BAR)
        bar = "#" * filled + "-" * (_BAR - filled)
        eta = _duration(max(table.estimate - table.rows, 0) / rate) if rate > 0 else "?"
        return (f"snapshot {table.name}: [{bar}] {table.rows:,} / ~{table.estimate:,} rows "
                f"{fraction:4.0%}  {rate:,.0f} rows/s  ETA {eta}")
    return f"snapshot {table.name}: {table.rows:,} rows  {rate:,.0f} rows/s  ETA ?"


class Progress:
    def __init__(self, tables: Sequence[TableProgress], *, stream: TextIO | None = None,
                 tty: bool | None = None, log_interval_s: float = 10.0) -> None:
        self.tables = list(tables)
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.log_interval_s = log_interval_s
        self._lock = threading.Lock()
        self._drawn = 0  # lines of the live block on the terminal
        self._last_log = time.monotonic()
        self._reported: set[int] = set()

    def add(self, table: int, rows: int) -> None:
        with self._lock:
            state = self.tables[table]
            if state.started is None:
                state.started = time.monotonic()
            state.rows += rows

    def chunk_done(self, table: int) -> None:
        with self._lock:
            state = self.tables[table]
            if state.started is None:
                state.started = time.monotonic()
            state.chunks -= 1
            if state.chunks <= 0:
                state.finished = time.monotonic()

    @property
    def rows(self) -> int:
        with self._lock:
            return sum(t.rows for t in self.tables)

    def render(self, *, final: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            done = [i for i, t in enumerate(self.tables)
                    if t.finished is not None and i not in self._reported]
            active = [t for t in self.tables if t.started is not None and t.finished is None]
            self._reported.update(done)
            done_lines = [format_line(self.tables[i], now) for i in done]
            active_lines = [] if final else [format_line(t, now) for t in active]
        if self.tty:
            self._draw(done_lines, active_lines)
            return
        for line in done_lines:
            log.info("%s", line)
        if active_lines and now - self._last_log >= self.log_interval_s:
            self._last_log = now
            for line in active_lines:
                log.info("%s", line)

    def _draw(self, done: list[str], active: list[str]) -> None:
        out = []
        if self._drawn:
            out.append(f"\x1b[{self._drawn}F\x1b[J")  # back to the block's start, clear below
        out.extend(f"{line}\n" for line in done)
        out.extend(f"{line}\x1b[K\n" for line in active)
        self._drawn = len(active)
        self.stream.write("".join(out))
        self.stream.flush()
