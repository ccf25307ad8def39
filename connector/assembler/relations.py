"""The relation cache: the latest Relation per relation id and the latest Type per type OID.

Like PostgreSQL's own apply worker (logicalrep_relmap_update) the cache is global, not per
transaction: a Relation replaces the previous one for its id as soon as it arrives, whichever
transaction or stream block it came in. pgoutput re-sends a Relation whenever the description
it last sent might not hold for the next change (after ALTER TABLE, after the invalidations of
an aborted or interleaved streamed transaction, first use in each streamed transaction). Changes
already buffered keep the Relation object that was current when they arrived.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from connector.pgoutput.messages import Relation, Type


class RelationCache:
    """`by_id` is the live dict (hot paths read it directly; write through `add_relation`);
    `relations` and `types` are read-only views."""

    __slots__ = ("by_id", "_types", "relations", "types")

    def __init__(self) -> None:
        self.by_id: dict[int, Relation] = {}
        self._types: dict[int, Type] = {}
        self.relations: Mapping[int, Relation] = MappingProxyType(self.by_id)
        self.types: Mapping[int, Type] = MappingProxyType(self._types)

    def add_relation(self, relation: Relation) -> None:
        self.by_id[relation.relation_id] = relation

    def add_type(self, type_: Type) -> None:
        self._types[type_.type_oid] = type_

    def get(self, relation_id: int) -> Relation | None:
        return self.by_id.get(relation_id)
