"""What the merge job asks of a lake format (`TableSink`), and what it gives a format's
factory (`TableSettings`). A format is a module with `open_sink(settings) -> TableSink`
plus its line in the registry (`spark_jobs/sinks/__init__.py`); the job calls nothing else.

Imports no pyspark at run time (the registry is read by `runtime/config.py`, which the
`pgcdc merge` CLI loads without a JVM)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from .inputs import BatchFacts as BatchFacts  # re-exported: what a format implements with
from .inputs import TableSettings as TableSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .mirror import Mirror


class TableSink(Protocol):
    """One lake table of one source table, written through Spark one batch at a time. Each
    call runs in the session it is given (the job gives each worker thread its own)."""

    @property
    def path(self) -> str:
        """Where the table is (`<root>/<schema>/<table>`)."""
        ...

    @property
    def mirror(self) -> Mirror | None:
        """The table as a mirror (`mirror.Mirror`: one row per key, following the upstream
        table's incarnations, with versions and tombstones; what --history,
        --consistent-cuts and tombstone expiry work on), or None: the format keeps no mirror
        (a change log), and the job applies each batch's changes as they are, in one part."""
        ...

    def original_names(self, spark: SparkSession) -> bool:
        """Whether the table's columns carry the PostgreSQL names (`names.column_names`)."""
        ...

    def apply(self, spark: SparkSession, changes: DataFrame, facts: BatchFacts,
              key: Sequence[str] | None, batch_id: int, part: str = "") -> None:
        """Write one batch's decoded `changes` (events of one key schema: `key`, None: no
        key). Idempotent per (`batch_id`, `part`): a batch Spark re-runs leaves the same
        table. `part` tells apart the parts of one batch (one per key schema)."""
        ...
