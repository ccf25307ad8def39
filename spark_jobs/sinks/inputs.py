"""What the job gives a lake format's sink (`table_sink.TableSink`): a table's settings
(to its factory), and the facts of a table's part of a batch (to each `apply`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..rules.changes import Position


@dataclass(frozen=True)
class TableSettings:
    """One table's lake settings: `<root>/<rel_path>`, from the job's configuration."""

    root: str
    rel_path: str  # `<schema>/<table>`
    app_id: str  # the run's id for idempotent writes (`job.app_id`)
    partition_by: Sequence[str] = ()
    properties: Mapping[str, str] = field(default_factory=dict)  # of new tables
    column_mapping: bool = False
    catalog_name: str | None = None  # `db`.`name` to register the table as, or None
    delta_rs: bool = False  # delta-rs reaches the lake: a mirror reads through it (no Spark)

    @property
    def path(self) -> str:
        return f"{self.root.rstrip('/')}/{self.rel_path}"


@dataclass
class BatchFacts:
    """What the job learned about a table's part of a batch in one small aggregation."""

    events: int  # row changes (not truncates)
    deletes: int
    truncate: Position | None
    toast: list[str]
    first: Position | None = None  # the earliest position of any change (truncates too)
    newest_ts: int | None = None  # newest commit time (source.ts_ms) of a change
    newest_lsn: int | None = None  # newest commit LSN of a change
