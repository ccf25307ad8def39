"""Compare a PostgreSQL table with its Delta mirror, value for value.

Used by `make demo` and the acceptance tests. Values are compared after a normalisation that
only bridges representation differences of the two readers (psycopg and Spark), never content:
timestamps to naive UTC, json to its parsed form, uuids and enums to text, decimals exactly,
`time` to microseconds since midnight (the lake's representation, docs/merge-internals.md),
`real` to the double its float32 widens to (as Spark reads the lake's float).
"""

from __future__ import annotations

import json
import math
import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql

from connector.names import to_avro_name
from connector.pgtypes.oids import ARRAY_OF, FLOAT4

from ..rules.names import METADATA_COLUMNS, column_names, q


@dataclass
class TableRows:
    columns: list[str]
    rows: dict[tuple[Any, ...], dict[str, Any]]  # by key


@dataclass
class Comparison:
    table: str
    pg_count: int
    lake_count: int
    differences: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.differences


def primary_key(conn: psycopg.Connection[Any], schema: str, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
        " AND a.attnum = ANY (i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary"
        " ORDER BY array_position(i.indkey, a.attnum)",
        (sql.Identifier(schema, table).as_string(conn),)).fetchall()
    return [r[0] for r in rows]


def pg_rows(dsn: str, schema: str, table: str) -> TableRows:
    with psycopg.connect(dsn) as conn:
        key = primary_key(conn, schema, table)
        cur = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table)))
        columns = [d.name for d in cur.description or []]
        reals = [d.name for d in cur.description or []
                 if d.type_code in (FLOAT4, ARRAY_OF[FLOAT4])]
        key = key or columns
        rows = {}
        for values in cur:
            row = dict(zip(columns, values, strict=True))
            for column in reals:
                row[column] = _widened(row[column])
            rows[tuple(normalize(row[k]) for k in key)] = row
    return TableRows(columns, rows)


def _widened(value: Any) -> Any:
    """A `real` (or each of a `real[]`'s, at any depth) as a double, as PostgreSQL's
    float4::float8 gives it: psycopg reads the shortest decimal text (3.4e+38), the lake
    holds the float32 (3.3999999521443642e+38)."""
    if isinstance(value, list):
        return [_widened(v) for v in value]
    return None if value is None else struct.unpack("f", struct.pack("f", value))[0]


def lake_names(pg_columns: Sequence[str], lake_columns: Iterable[str]) -> dict[str, str]:
    """PostgreSQL column → the lake column holding it, named as the merge job names it
    (`names.column_names` over the table's columns, through the injective Avro name mapping of
    `connector.names`): `order date` is `order_x0020date` in a table without column mapping,
    `_cdc_op` is `_x005Fcdc_x005Fop`. The naming (with column mapping or not) matching more
    lake columns wins; a column with no lake column is left out."""
    record = {"fields": [{"name": to_avro_name(c), "pg_name": c} for c in pg_columns]}
    have = set(lake_columns)
    best: dict[str, str] = {}
    for original in (False, True):
        names = column_names(record, original)
        found = {c: names[to_avro_name(c)] for c in pg_columns
                 if names[to_avro_name(c)] in have}
        if len(found) > len(best):
            best = found
    return best


def lake_rows(spark: Any, path: str, key: Sequence[str]) -> TableRows:
    """The lake table's rows by `key` (PostgreSQL names, or lake names)."""
    frame = spark.read.format("delta").load(path)
    columns = [c for c in frame.columns if c not in METADATA_COLUMNS]
    key_names = lake_names(key, columns)
    key = [k if k in columns else key_names.get(k, k) for k in key]
    rows = {}
    # Quoted: lake column names may hold dots or backticks (column mapping).
    for record in frame.select(*map(q, columns)).collect():
        row = record.asDict(recursive=True)
        rows[tuple(normalize(row[k]) for k in key)] = row
    return TableRows(columns, rows)


def normalize(value: Any, like: Any = None) -> Any:
    """A comparable form; `like` is the other side's value (to read json text as json)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, time) and value.tzinfo is None:
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 \
            + value.microsecond
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN: equal NaNs compare equal
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return value.normalize() if value.is_finite() else str(value)
    if isinstance(value, str) and isinstance(like, (dict, list)) and not _is_text_list(like):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _is_text_list(value: Any) -> bool:
    """A non-empty list of texts: a text[] column, not json (an empty one is told by the lake's
    side: an empty json array is the text '[]' there, an empty text[] a list)."""
    return isinstance(value, list) and bool(value) and all(
        v is None or isinstance(v, str) for v in value)


def compare(table: str, pg: TableRows, lake: TableRows, limit: int = 10) -> Comparison:
    """Rows present on one side only, and differing values in PostgreSQL's columns. Columns
    the lake keeps after they were dropped upstream are not compared."""
    result = Comparison(table, len(pg.rows), len(lake.rows))
    names = lake_names(pg.columns, lake.columns)
    missing_columns = [c for c in pg.columns if c not in names]
    if missing_columns:
        result.differences.append(f"columns missing in the lake: {missing_columns}")
        return result
    for key in pg.rows.keys() - lake.rows.keys():
        result.differences.append(f"row {key} only in PostgreSQL")
    for key in lake.rows.keys() - pg.rows.keys():
        result.differences.append(f"row {key} only in the lake")
    for key in pg.rows.keys() & lake.rows.keys():
        for column in pg.columns:
            a, b = pg.rows[key][column], lake.rows[key][names[column]]
            if normalize(a, b) != normalize(b, a):
                result.differences.append(f"row {key} column {column}: PostgreSQL {a!r}, "
                                          f"lake {b!r}")
    result.differences = sorted(result.differences)[:limit] + (
        [f"... {len(result.differences) - limit} more"] if len(result.differences) > limit
        else [])
    return result


def side_by_side(pg: TableRows, lake: TableRows, limit: int = 5) -> Iterable[str]:
    """A few rows of each side, for people to look at."""
    names = lake_names(pg.columns, lake.columns)
    for key in sorted(pg.rows, key=repr)[:limit]:
        left = {c: pg.rows[key][c] for c in pg.columns}
        right = {c: lake.rows.get(key, {}).get(names.get(c, c)) for c in pg.columns}
        yield f"  PostgreSQL {_short(left)}"
        yield f"  Delta      {_short(right) if key in lake.rows else '(missing)'}"


def _short(row: dict[str, Any], width: int = 150) -> str:
    text = ", ".join(f"{k}={normalize(v)!s}" for k, v in row.items())
    return text if len(text) <= width else text[: width - 3] + "..."
