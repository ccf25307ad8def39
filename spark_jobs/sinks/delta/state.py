"""What both Delta engines (Spark: `spark_writer`, delta-rs: `delta_rs_writer`) know about one
table between batches: where it and its tombstones are, how new tables are made, and what
the existing table is (columns, types, partitioning, truncate cut, incarnation), learnt once
by whichever engine reads it first and kept up to date by whichever writes."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

from ...cuts.manifest import tombstone_key
from ...lake.delta_handles import DeltaHandles
from ...rules.changes import IDX, LSN, META, OP, TS, Position
from ...rules.incarnation import Incarnation
from ..inputs import TableSettings

log = logging.getLogger(__name__)

TRUNCATE_LSN, TRUNCATE_IDX = "pgcdc.truncate.commitLsn", "pgcdc.truncate.txnIndex"
COLUMN_MAPPING = "delta.columnMapping.mode"
# Name mode and the lowest protocol that has it (reader 2: Delta 1.2+; docs/merge-job.md,
# "Column names").
MAPPING_PROPERTIES = {COLUMN_MAPPING: "name", "delta.minReaderVersion": "2",
                      "delta.minWriterVersion": "5"}
META_FIELDS = [StructField(OP, StringType()), StructField(LSN, LongType()),
               StructField(IDX, LongType()), StructField(TS, LongType())]


class ConfigurationError(ValueError):
    pass


class DeltaTableState:
    """One table: `<root>/<schema>/<table>`, tombstones at
    `<root>/_pgcdc/tombstones/<schema>/<table>`. `columns` is None until the existing table
    was read (or the table created)."""

    def __init__(self, settings: TableSettings) -> None:
        self.path = settings.path
        self.tomb_path = f"{settings.root.rstrip('/')}/{tombstone_key(settings.rel_path)}"
        self.app_id = settings.app_id
        self.partition_by = list(settings.partition_by)
        # Set on creation only; column mapping as asked, unless the user chose the versions.
        self.properties = {**(MAPPING_PROPERTIES if settings.column_mapping else {}),
                           **settings.properties}
        # New tables with mapping (also when asked with --table-property) take original names.
        self.column_mapping = self.properties.get(COLUMN_MAPPING, "none") != "none"
        self.catalog_name = settings.catalog_name
        self.mapped = False  # the table has column mapping (known once loaded or created)
        self.partitions: list[str] = []
        self.columns: list[str] | None = None  # row columns, None = not loaded yet
        self.types: dict[str, DataType] = {}  # lower-cased row column → its type in the table
        # Whether the tombstone table exists. True: it does (learnt with the table, or created
        # or found by either engine). False: none was there when the table was learnt and
        # neither engine has made one since; or not known: a table either engine created this
        # run (tombstones left by a table removed from the lake by hand may be there), or a
        # create whose commit landed before its batch failed. Storage is not asked at the first
        # deletes: each engine's create takes a tombstone table already there (delta-rs: an
        # append that creates; Spark: `SparkDeltaSink._create_tombstones`) and sets this.
        self.has_tombstones = False
        self.truncate_cut: Position | None = None
        self.incarnation: Incarnation | None = None  # the upstream table it holds (if known)
        self.fast_batches = 0  # batches delta-rs applied in this run (`DeltaRsSink.maintain`)
        self.handles = DeltaHandles()  # delta-rs handles of the table and its tombstones

    @property
    def loaded(self) -> bool:
        return self.columns is not None

    def learn(self, properties: Mapping[str, str], partitions: Sequence[str],
              schema: StructType, has_tombstones: bool) -> None:
        """Remember what the existing table is (read by Spark or by delta-rs)."""
        self.mapped = properties.get(COLUMN_MAPPING, "none") != "none"
        self.partitions = list(partitions)
        if self.column_mapping and not self.mapped:
            log.warning("%s: an existing table without column mapping keeps its column "
                        "names (--column-mapping applies to new tables)", self.path)
        if TRUNCATE_LSN in properties:
            self.truncate_cut = Position(int(properties[TRUNCATE_LSN]),
                                         int(properties[TRUNCATE_IDX]))
        self.incarnation = Incarnation.of_properties(properties)
        self.columns = [f.name for f in schema.fields if f.name not in META]
        self.types = {f.name.lower(): f.dataType for f in schema.fields}
        self.has_tombstones = has_tombstones

    def created(self, fields: Sequence[StructField]) -> None:
        """The table was just created with these row columns (and `partition_by`)."""
        self.columns = [f.name for f in fields]
        self.types = {f.name.lower(): f.dataType for f in fields}
        self.mapped = self.column_mapping
        self.partitions = list(self.partition_by)

    def create_properties(self) -> dict[str, str]:
        """The table properties of a table created now."""
        return {**self.properties,
                **(self.incarnation.properties() if self.incarnation else {})}

    def original_names(self) -> bool:
        """Whether the table's columns carry the PostgreSQL names: a loaded table with column
        mapping does, one without keeps the names it has; a table still to be created
        follows --column-mapping."""
        return self.mapped if self.loaded else self.column_mapping
