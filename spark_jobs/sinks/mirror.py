"""What the merge job asks of a table kept as a mirror of its upstream table (`Mirror`): one
row per key, following the upstream table's incarnations, with versions a cut can name and
tombstones that expire. A format keeping mirrors answers its `TableSink.mirror` with one; a
change log answers None, and the features that need a mirror (--history, --consistent-cuts,
tombstone expiry, incarnations) are refused for it by the format registry
(`spark_jobs/sinks/__init__.py`).

A mirror chooses its own engine for each of these (the Delta mirror, `sinks/delta/mirror.py`:
delta-rs where it reaches the lake, else Spark): the job calls each once per table, and
nothing in the job names a format. Imports no pyspark at run time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..rules.incarnation import Incarnation


class Mirror(Protocol):
    """One mirror table. Each call runs in the session it is given."""

    @property
    def path(self) -> str:
        """Where the table is (`<root>/<schema>/<table>`)."""
        ...

    @property
    def incarnation(self) -> Incarnation | None:
        """The upstream table's incarnation it holds (`rules/incarnation.py`; None: not
        known yet)."""
        ...

    def exists(self, spark: SparkSession) -> bool:
        """Whether the table is there (read once, then known)."""
        ...

    def take(self, spark: SparkSession, incarnation: Incarnation, replace: bool,
             template: DataFrame | None) -> None:
        """Hold `incarnation` from now on; `replace`: the table held another, whose rows go,
        and it takes the columns of `template` (the new incarnation's decoded changes; None
        only for a table still to be created)."""
        ...

    def register(self, spark: SparkSession) -> None:
        """Register the table in the session catalog when the job was asked to (--database);
        called after each batch that wrote it, a no-op once done."""
        ...

    def version(self, spark: SparkSession) -> int | None:
        """The table's current version (what a cut names; None: no table)."""
        ...

    def tombstones_version(self, spark: SparkSession) -> int | None:
        """The current version of the table's tombstones (None: it has none)."""
        ...

    def newest_position(self, spark: SparkSession) -> int | None:
        """The newest commit LSN the table holds: its rows', its tombstones', its
        truncate's (None: nothing)."""
        ...

    def expire_tombstones(self, spark: SparkSession, bound: int) -> int:
        """Delete the tombstones `rules/expiry.py`'s `expired_predicate(bound)` selects; how
        many went (nothing written when none)."""
        ...
