"""What the PostgreSQL server supports, by version: the one place for these facts.

Read once per connection (`ReplicationAdmin.features`, or `ServerFeatures(conn.info.
server_version)`) and passed down; nothing else compares version numbers. Pure: no IO.

=============================  =======  ====================================================
fact                           from     used by
=============================  =======  ====================================================
pgoutput protocol 2 (stream)   14       START_REPLICATION proto_version
protocol 3 (two-phase)         15
protocol 4 (parallel stream)   16
TID range scans                14       snapshot chunks by ctid range
column lists and row filters   15       the snapshot's Relation and rows (pg_publication_tables)
CREATE_REPLICATION_SLOT (...)  15       the new option syntax ("SNAPSHOT 'export'")
failover slots                 17       --failover-slot, ALTER_REPLICATION_SLOT, status
generated columns published    18       the snapshot's Relation (pgoutput sends them from 18)
=============================  =======  ====================================================
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServerFeatures"]


@dataclass(frozen=True)
class ServerFeatures:
    version_num: int  # server_version_num: 180001 for 18.1

    @property
    def major(self) -> int:
        return self.version_num // 10000

    @property
    def protocol_version(self) -> int:
        """Highest pgoutput protocol the server accepts: 16+ → 4, 15 → 3, 14 → 2, else 1."""
        return min(4, self.major - 12) if self.major >= 14 else 1

    @property
    def tid_range_scans(self) -> bool:
        return self.major >= 14

    @property
    def publication_column_lists(self) -> bool:
        """pg_publication_tables has attnames and rowfilter (column lists, row filters)."""
        return self.major >= 15

    @property
    def slot_option_list(self) -> bool:
        """CREATE_REPLICATION_SLOT takes ``(SNAPSHOT 'export')`` rather than EXPORT_SNAPSHOT."""
        return self.major >= 15

    @property
    def failover_slots(self) -> bool:
        return self.major >= 17

    @property
    def publishes_generated_columns(self) -> bool:
        return self.major >= 18
