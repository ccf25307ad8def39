"""Catalog facts the pgoutput stream does not carry, looked up on a SQL connection (IO edge):
user types (enums, domains, arrays of them, composites' attributes), declared array
dimensions, primary keys, column defaults."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import psycopg
from psycopg import sql

from connector.avro import ARRAY_DIMS_QUERY
from connector.errors import SourceError, connection_gone, first_line
from connector.pgoutput.messages import Relation
from connector.pgtypes import CATALOG_QUERY, COMPOSITE_QUERY, TypeCatalog
from connector.pgtypes.session import OUTPUT_SETTINGS

log = logging.getLogger(__name__)

PRIMARY_KEY_QUERY = (
    "SELECT a.attname::text FROM pg_index i"
    " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
    " WHERE i.indrelid = %s AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)"
)

#: Column defaults as PostgreSQL stores them (``adbin``, a node tree) and prints them; generated
#: columns' expressions are not defaults.
DEFAULTS_QUERY = (
    "SELECT a.attname::text, d.adbin::text, pg_catalog.pg_get_expr(d.adbin, d.adrelid),"
    " pg_catalog.format_type(a.atttypid, a.atttypmod)"
    " FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_attribute a"
    " ON a.attrelid = d.adrelid AND a.attnum = d.adnum"
    " WHERE d.adrelid = %s AND NOT a.attisdropped AND a.attgenerated = ''"
)
IMMUTABLE_QUERY = ("SELECT oid::int FROM pg_catalog.pg_proc"
                   " WHERE oid = ANY(%s) AND provolatile = 'i'")
#: Settings the default's text is printed with: those of the replication stream, so the
#: column's own text loader reads it (connector/replication/stream.py).
_OUTPUT_SETTINGS = OUTPUT_SETTINGS
# Expression nodes of a default that is a constant: literals and immutable conversions of them.
_CONSTANT_NODES = frozenset({"CONST", "FUNCEXPR", "OPEXPR", "RELABELTYPE", "ARRAYEXPR"})
_NODE = re.compile(r"\{([A-Z_]+)")
_FUNCTION = re.compile(r":(?:funcid|opfuncid) (\d+)")


def default_functions(node_tree: str) -> set[int] | None:
    """The functions a default expression (``pg_attrdef.adbin``'s text) calls, when it is built
    of literals and function or operator calls only; None when it has any other node (a
    sequence, ``CURRENT_TIMESTAMP``, a sub-select, a cast through text...)."""
    if any(node not in _CONSTANT_NODES for node in _NODE.findall(node_tree)):
        return None
    return {int(oid) for oid in _FUNCTION.findall(node_tree)}


def constant_defaults(rows: Iterable[tuple[str, str, str, str]],
                      immutable: set[int]) -> dict[str, str]:
    """Column -> default expression (``pg_get_expr``'s text) cast to the column's type (what
    an insert stores: ``'a'`` in a char(3) is ``'a  '``), for the defaults that are
    constants: their nodes are literals and calls of `immutable` functions only (a default
    PostgreSQL evaluates to the same value for every row: ``'dflt'``, ``42``, ``'{}'::jsonb``;
    not ``now()``, ``nextval(...)``, ``gen_random_uuid()``)."""
    out = {}
    for name, node_tree, expression, column_type in rows:
        functions = default_functions(node_tree)
        if functions is not None and functions <= immutable:
            out[name] = f"CAST(({expression}) AS {column_type})"
    return out


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

    def prepare_composite(self, type_oid: int, *, refresh: bool = False) -> None:
        """Learn the attributes of the composite `type_oid` is (or is a domain over), the
        types of its attributes, and so on down nested composites and arrays of them.
        `refresh`: read the attributes again (after ``ALTER TYPE``), not only unknown ones.
        The catalog is read as it is now, not as of any change being decoded."""
        pending, seen = [type_oid], set()
        while pending:
            missing = self.types.needs_lookup(pending)
            if missing:
                self.types.add_rows(self._query(CATALOG_QUERY, [missing]))
            composites = []
            for oid in pending:
                pg_type = self.types.get(oid)
                while pg_type is not None and pg_type.kind == "array":  # arrays of composites
                    pg_type = self.types.get(pg_type.element_oid)
                composite = None if pg_type is None else self.types.composite(pg_type.oid)
                if composite is not None and composite.oid not in seen and (
                        refresh or composite.attributes is None):
                    seen.add(composite.oid)
                    composites.append(composite.oid)
            if not composites:
                return
            self.types.add_composite_rows(composites, self._query(COMPOSITE_QUERY, [composites]))
            pending = sorted({a.type_oid for oid in composites
                              for a in self.types.composite(oid).attributes or ()})  # type: ignore[union-attr]

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

    def column_defaults(self, relation: Relation) -> dict[str, str]:
        """Column -> the text of its constant default, printed as the stream prints values
        (`constant_defaults`; a column without one is absent)."""
        rows = [(str(n), str(t), str(e), str(c))
                for n, t, e, c in self._query(DEFAULTS_QUERY, [relation.relation_id])]
        if not rows:
            return {}
        called = sorted(set().union(*(default_functions(r[1]) or set() for r in rows)))
        immutable = {int(r[0]) for r in self._query(IMMUTABLE_QUERY, [called])} if called \
            else set()
        expressions = constant_defaults(rows, immutable)
        if not expressions:
            return {}
        # One query for the table: each constant's text, or NULL for a NULL value. The
        # expressions are the server's own deparsed catalog text, evaluated without side effects
        # (immutable calls only); the settings are the stream's, and rolled back with the
        # transaction (or savepoint, on a connection inside a snapshot's transaction).
        columns = list(expressions)
        query = sql.SQL("SELECT {}").format(sql.SQL(", ").join(
            sql.SQL("(SELECT pg_catalog.format('%s', v) FROM (SELECT {} AS v) s"
                    " WHERE v IS NOT NULL)").format(sql.SQL(expressions[c]))
            for c in columns))
        row: tuple[object, ...] | None = None
        try:
            with self.conn.transaction():
                for name, value in _OUTPUT_SETTINGS:
                    self.conn.execute("SELECT pg_catalog.set_config(%s, %s, true)", [name, value])
                row = self.conn.execute(query).fetchone()
                raise psycopg.Rollback()
        except psycopg.Error as exc:
            detail = first_line(exc)
            if connection_gone(detail):
                raise SourceError(f"catalog lookup failed: {detail}", transient=True) from None
            # a default that fails when evaluated (DEFAULT 1/0 is accepted by CREATE TABLE)
            log.warning("%s.%s: column defaults not carried to the schema (%s)",
                        relation.namespace, relation.name, detail)
            return {}
        if row is None:
            return {}
        return {column: str(text) for column, text in zip(columns, row, strict=True)
                if text is not None}
