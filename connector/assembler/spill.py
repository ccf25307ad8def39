"""Spill files: a buffered transaction's changes on local disk instead of in memory.

A `SpillFile` is an anonymous temporary file (on Linux `O_TMPFILE`, elsewhere created and
unlinked at once), so it has no name in the spill directory and nothing is left behind even if
the process is killed: its space is freed when the file is closed, explicitly or when the last
reference to it goes away.

The file is a sequence of batches, each a pickled list of entries written at the end with
`os.pwrite` and read back with `os.pread`, so several readers can iterate it independently.
`truncate(position)` cuts it back to a position (a rolled-back subtransaction).

Pickle is safe here: the process reads only what it wrote itself, to a file nobody else can
open (it has no name).
"""

from __future__ import annotations

import os
import pickle
import tempfile
import weakref
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# One spilled entry: (index into the transaction's relation table or -1, message, wal_lsn).
SpillEntry = tuple[int, Any, int]


class SpillFile:
    """Append-only (but truncatable) batches of entries in an anonymous temporary file."""

    __slots__ = ("_file", "_fd", "_size", "_starts", "_batches", "_count", "_finalizer",
                 "__weakref__")

    def __init__(self, directory: str | Path | None = None) -> None:
        self._file = tempfile.TemporaryFile(prefix="pgcdc-spill-", dir=directory, buffering=0)
        self._fd = self._file.fileno()
        self._size = 0
        self._starts: list[int] = []  # first position of each batch
        self._batches: list[tuple[int, int, int]] = []  # (offset, length, entry count)
        self._count = 0
        # Closes the file when this object is garbage collected, or at interpreter exit.
        self._finalizer = weakref.finalize(self, self._file.close)

    @property
    def count(self) -> int:
        """Entries in the file."""
        return self._count

    @property
    def size(self) -> int:
        """Bytes in the file."""
        return self._size

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def append(self, entries: list[SpillEntry]) -> None:
        """Write one batch (entries at positions count .. count + len(entries) - 1)."""
        if not entries:
            return
        data = pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL)
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, memoryview(data)[written:], self._size + written)
        self._starts.append(self._count)
        self._batches.append((self._size, len(data), len(entries)))
        self._size += len(data)
        self._count += len(entries)

    def _read(self, index: int) -> list[SpillEntry]:
        offset, length, _ = self._batches[index]
        data = os.pread(self._fd, length, offset)
        while len(data) < length:  # pread may return less than asked
            more = os.pread(self._fd, length - len(data), offset + len(data))
            if not more:
                raise OSError(f"spill file shorter than expected at offset {offset}")
            data += more
        entries: list[SpillEntry] = pickle.loads(data)
        return entries

    def batches(self) -> Iterator[list[SpillEntry]]:
        """Every batch in order. Reads the batches present when each one is reached."""
        index = 0
        while index < len(self._batches):
            yield self._read(index)
            index += 1

    def truncate(self, position: int) -> list[SpillEntry]:
        """Drop every entry at `position` or later.

        The file is cut at the start of the batch holding `position`; the entries of that batch
        before `position` are returned (the caller keeps them in memory or appends them again).
        """
        if position >= self._count:
            return []
        index = bisect_right(self._starts, position) - 1
        kept = self._read(index)[: position - self._starts[index]]
        offset = self._batches[index][0]
        os.ftruncate(self._fd, offset)
        del self._starts[index:]
        del self._batches[index:]
        self._size = offset
        self._count = self._starts[-1] + self._batches[-1][2] if self._starts else 0
        return kept

    def close(self) -> None:
        """Close and free the file (idempotent)."""
        self._finalizer()
