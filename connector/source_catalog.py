"""Catalog facts the pgoutput stream does not carry, looked up on a SQL connection (IO edge):
user types (enums, domains, arrays of them), declared array dimensions, primary keys."""

from __future__ import annotations

import logging

import psycopg

from connector.avro import ARRAY_DIMS_QUERY
from connector.errors import SourceError, connection_gone, first_line
from connector.pgoutput.messages import Relation
from connector.pgtypes import CATALOG_QUERY, TypeCatalog

log = logging.getLogger(__name__)

PRIMARY_KEY_QUERY = (
    "SELECT a.attname::text FROM pg_index i"
    " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
    " WHERE i.indrelid = %s AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)"
)


class PostgresCatalog:
    def __init__(self, conn: psycopg.Connection[tuple], types: TypeCatalog) -> None:  # type: ignore[type-arg]
        self.conn = conn
        self.types = types

    def _query(self, query: str, params: list[object]) -> list[tuple]:  # type: ignore[type-arg]
        try:
            return self.conn.execute(query, params).fetchall()
        except psycopg.Error as exc:
            detail = first_line(exc)
            raise SourceError(f"catalog lookup failed: {detail}",
                              transient=connection_gone(detail)) from None

    def prepare_types(self, relation: Relation) -> None:
        missing = self.types.needs_lookup(c.type_oid for c in relation.columns)
        if missing:
            self.types.add_rows(self._query(CATALOG_QUERY, [missing]))

    def array_dims(self, relation: Relation) -> dict[str, int]:
        return {str(name): int(dims)
                for name, dims in self._query(ARRAY_DIMS_QUERY, [relation.relation_id])}

    def key_columns(self, relation: Relation) -> list[str] | None:
        """The primary key when REPLICA IDENTITY FULL flags every column as key (keying by the
        whole row would turn every update into a delete + insert); else the Relation's flags."""
        if relation.replica_identity != "f":
            return None
        names = [str(r[0]) for r in self._query(PRIMARY_KEY_QUERY, [relation.relation_id])]
        columns = {c.name for c in relation.columns}
        return names if names and set(names) <= columns else None
