"""Incremental snapshots: a table's rows re-published while streaming goes on (DBLog).

    pgcdc snapshot --tables 'public.orders'     # a request in the signal table

A request comes from the signal table (`signals`): ``pgcdc snapshot``, a re-sync after DDL
that changed existing rows (`resync`, deciding with `rewrites` on what `catalog` reads), or a
new table joining the publication (`watcher`). The driver (`driver`) reads each table in
key-ordered chunks (`chunk_query`) between a low and a high watermark in the WAL; the chunk
window (`window`) drops the rows the stream changes meanwhile, which is why no snapshot row
ever overwrites a newer change (the argument is in `window`'s docstring).

The publisher sees the driver through its `open_window` (a `ChunkWindow`) and `watermark`.
"""

from . import signals
from .driver import IncrementalSnapshots
from .resync import DdlResync
from .watcher import TableWatcher
from .window import ChunkWindow

__all__ = ["ChunkWindow", "DdlResync", "IncrementalSnapshots", "TableWatcher", "signals"]
