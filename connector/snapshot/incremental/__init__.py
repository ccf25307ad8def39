"""Incremental snapshots: a table's rows re-published while streaming goes on (DBLog).

    pgcdc snapshot --tables 'public.orders'     # a request in the signal table

A request comes from the signal table (`signals`) or, with no write on the source, from the
``<prefix>.signal`` Kafka topic (`signal_topic`; which one: `channel`; both behind `stores`):
``pgcdc snapshot``, a re-sync after DDL that changed existing rows (`resync`, deciding with
`rewrites` on what `catalog` reads), or a new table joining the publication (`watcher`). The
driver (`driver`) reads each table in key-ordered chunks (`chunk_query`, read and encoded in a
thread of their own while the stream goes on: `reader`) between a low and a
high watermark in the WAL, or, read-only (a standby, a request over Kafka), between the
stream's position and a WAL horizon (`readonly`); the chunk window (`window`) drops the rows
the stream changes meanwhile, which is why no snapshot row ever overwrites a newer change (the
arguments are in `window`'s and `readonly`'s docstrings). A table without a key is read whole,
under a SHARE lock, and published as a truncate and its rows at one cut in the stream
(`whole`).

The publisher sees the driver through its `open_window` (a `ChunkWindow`) and `watermark`.
"""

from . import signals
from .driver import IncrementalSnapshots
from .resync import DdlResync
from .watcher import TableWatcher
from .window import ChunkWindow

__all__ = ["ChunkWindow", "DdlResync", "IncrementalSnapshots", "TableWatcher", "signals"]
