"""`pgcdc verify`'s PostgreSQL side: the source read as of one position L, in one transaction.

`SourceAt.open` creates a temporary logical slot with an exported snapshot (the initial
snapshot's mechanism, connector/snapshot/slot.py): its consistent point is L. A REPEATABLE
READ, READ ONLY transaction imports the snapshot (`SET TRANSACTION SNAPSHOT`) and then reads
every table as of L however long the comparison takes; the slot is dropped right after the
import (the transaction keeps the snapshot), so verification never holds WAL back.

Per table: one scan computes every hash range's summary (`GROUP BY` range); a second scan, only
when ranges differ, fetches the rows of those ranges; a third, only for tables with directly
compared columns, reads the key and those columns of every row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from connector.errors import SourceError, first_line
from connector.pgoutput.lsn import lsn_to_str
from connector.replication.features import ServerFeatures
from connector.snapshot.slot import ExportedSnapshot

from .canon import PgColumn, TableCanon, pg_bucket, pg_hash, pg_joined, pg_quote, pg_text
from .report import RangeSummary, Row

FETCH_ROWS = 10_000


class SourceAt:
    def __init__(self, conn: psycopg.Connection[Any], lsn: int) -> None:
        self.conn = conn
        self.lsn = lsn

    @classmethod
    def open(cls, dsn: str, slot_prefix: str = "pgcdc_verify") -> SourceAt:
        try:
            conn = psycopg.connect(dsn, application_name="pgcdc-verify")
        except psycopg.OperationalError as exc:
            raise SourceError(f"cannot connect to PostgreSQL: {first_line(exc)}") from None
        try:
            features = ServerFeatures(conn.info.server_version)
            exported = ExportedSnapshot.create(dsn, f"{slot_prefix}_{uuid.uuid4().hex[:8]}",
                                               features)
            try:
                conn.execute("SET DateStyle = ISO")
                conn.execute("SET TimeZone = 'UTC'")
                conn.execute("SET extra_float_digits = 3")
                conn.execute("SET IntervalStyle = iso_8601")
                conn.commit()
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                    sql.Literal(exported.snapshot_name)))
            finally:
                exported.close()
        except BaseException:
            conn.close()
            raise
        return cls(conn, exported.consistent_point)

    @property
    def lsn_text(self) -> str:
        return lsn_to_str(self.lsn)

    def close(self) -> None:
        self.conn.close()

    # --- catalog ---------------------------------------------------------------------------
    def columns(self, schema: str, table: str) -> list[PgColumn]:
        """The table's columns in order, each with its base type (domains resolved); empty
        when the table does not exist at L."""
        found = self.conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                                  (sql.Identifier(schema, table).as_string(self.conn),)).fetchone()
        if not found or not found[0]:
            return []
        rows = self.conn.execute(
            "WITH RECURSIVE base(attnum, attname, oid, depth) AS ("
            " SELECT a.attnum, a.attname::text, a.atttypid, 0 FROM pg_catalog.pg_attribute a"
            " WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped"
            " UNION ALL SELECT b.attnum, b.attname, t.typbasetype, b.depth + 1"
            " FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.oid WHERE t.typtype = 'd')"
            " SELECT DISTINCT ON (b.attnum) b.attname, t.typname::text, t.typtype = 'e'"
            " FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.oid"
            " ORDER BY b.attnum, b.depth DESC",
            (sql.Identifier(schema, table).as_string(self.conn),)).fetchall()
        return [PgColumn(name, typ, bool(enum)) for name, typ, enum in rows]

    def primary_key(self, schema: str, table: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY (i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary"
            " ORDER BY array_position(i.indkey, a.attnum)",
            (sql.Identifier(schema, table).as_string(self.conn),)).fetchall()
        return [r[0] for r in rows]

    def estimated_rows(self, schema: str, table: str) -> int:
        """The planner's estimate (never-analysed tables: from their size)."""
        row = self.conn.execute(
            "SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint"
            " ELSE pg_catalog.pg_relation_size(c.oid) / 64 END FROM pg_catalog.pg_class c"
            " WHERE c.oid = %s::regclass",
            (sql.Identifier(schema, table).as_string(self.conn),)).fetchone()
        return int(row[0]) if row else 0

    # --- data ------------------------------------------------------------------------------
    def _relation(self, schema: str, table: str) -> str:
        return _esc(f"{pg_quote(schema)}.{pg_quote(table)}")

    def summaries(self, schema: str, table: str, canon: TableCanon, ranges: int,
                  excluded: Sequence[str]) -> dict[int, RangeSummary]:
        """Every range's summary, rows of `excluded` keys (texts of keys changed after L)
        left out."""
        key = _esc(pg_joined(canon, canon.key))
        row = _esc(pg_joined(canon, canon.hashed))
        query = (f"SELECT {pg_bucket('k', ranges)} AS b, count(*), bit_xor(h), sum(h)"
                 f" FROM (SELECT {key} AS k, {pg_hash(row)} AS h"
                 f" FROM {self._relation(schema, table)}) s WHERE k <> ALL(%s) GROUP BY 1")
        return {int(b): RangeSummary(int(n), int(x), int(t))
                for b, n, x, t in self.conn.execute(query, (list(excluded),)).fetchall()}

    def rows(self, schema: str, table: str, canon: TableCanon, ranges: int,
             buckets: Sequence[int], excluded: Sequence[str]) -> dict[str, Row]:
        """The rows of `buckets`: key text → column → canonical text (hashed columns) or
        value (direct columns)."""
        return self._fetch(schema, table, canon, canon.hashed, canon.direct,
                           f"{pg_bucket('k', ranges)} = ANY(%s) AND k <> ALL(%s)",
                           (list(buckets), list(excluded)))

    def direct_rows(self, schema: str, table: str, canon: TableCanon,
                    excluded: Sequence[str]) -> dict[str, Row]:
        """Every row's key texts and directly compared values."""
        return self._fetch(schema, table, canon, canon.key, canon.direct, "k <> ALL(%s)",
                           (list(excluded),))

    def _fetch(self, schema: str, table: str, canon: TableCanon, texts: Sequence[str],
               values: Sequence[str], where: str, params: tuple[Any, ...]) -> dict[str, Row]:
        select = [f"{_esc(pg_text(canon, c))} AS {_esc(pg_quote('t_' + c))}" for c in texts]
        select += [_esc(pg_quote(c)) for c in values]
        query = (f"SELECT * FROM (SELECT {_esc(pg_joined(canon, canon.key))} AS k,"
                 f" {', '.join(select)} FROM {self._relation(schema, table)}) s WHERE {where}")
        out: dict[str, Row] = {}
        with self.conn.cursor(name=f"verify_{uuid.uuid4().hex[:8]}") as cur:
            cur.itersize = FETCH_ROWS
            cur.execute(query, params)
            columns = list(texts) + list(values)
            for record in cur:
                out[record[0]] = dict(zip(columns, record[1:], strict=True))
        return out


def _esc(text: str) -> str:
    """SQL text for a query with parameters: a literal `%` doubled (`format('%s', c)`)."""
    return text.replace("%", "%%")
