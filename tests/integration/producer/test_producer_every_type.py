"""Issue 24 (part 1): a property test over the server's own catalog. One table holds a column
of every type in ``pg_type`` that a table column can have -- base types, arrays, domains,
enums, ranges, multiranges, composites, and the arrays of each -- with values made by the
types' own input functions; one `pgcdc run` (text tuples) per server reads that row in its
initial snapshot (COPY) and streams an INSERT of it, an INSERT of NULLs and an UPDATE (REPLICA
IDENTITY FULL: the row in ``before`` and ``after``), on PostgreSQL 15 and 18, without
stopping, and every value reads back as schemas/README.md says.

Which types: ``pg_type`` rows that are defined (no shell types), not pseudo-types, in
``pg_catalog`` or ``information_schema`` (the server's own), plus one type of each user kind
made here (an enum, a domain over numeric(8,2), a composite, a range over the enum and its
multirange), plus the array of each of those. Row types of tables and views are left out (the
composite made here stands for them). A type is kept when ``CREATE TABLE (c <type>)`` accepts
it and its input function accepts one of `CANDIDATES` (the first accepted is its value);
types with no accepted literal are skipped, listed and counted (internal types whose input
function refuses everything: pg_node_tree, pg_ndistinct, pg_dependencies, pg_mcv_list,
pg_brin_bloom_summary, pg_brin_minmax_multi_summary, gtsvector and its array; cstring[] is no
column type; xml where the server is built without libxml, as the embedded PostgreSQL 18 is).
`unknown` is a pseudo-type since PostgreSQL 10. Run with ``-s`` to see the counts.

How each value is compared (the expected value comes from the server's text output of the
column, ``SELECT col::text`` under DateStyle ISO, IntervalStyle iso_8601, TimeZone UTC):

* typed mappings of the README (`TYPED`): bool, int2/int4/int8, oid/xid/cid, xid8 (decimal),
  float4/float8, date, time, timestamp, timestamptz, uuid, bytea, int2vector/oidvector (arrays)
  and the domain over numeric(8,2) (a decimal(8,2)) -- non-null and equal to the Python value
  parsed from that text;
* every other type is a string column: equal to its text (money: the README's exact amount,
  the text without its currency symbol);
* arrays: element-wise as their element type (each element's output text).

A value published by the fallback rule (its log line ``published as`` or a non-empty
``unparsed`` map) fails the test, naming the column and its type.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from devstack.ports import free_port
from psycopg import sql

from tests.support.cdc_checks import read_records
from tests.support.producer import scrape_metrics

pytestmark = pytest.mark.integration

#: Literals tried in this order with each type's input function; the first accepted is used.
CANDIDATES = (
    "1", "t", "1.5", "2024-01-02", "2024-01-02 03:04:05.678", "2024-01-02 03:04:05.678+05:30",
    "03:04:05.678", "03:04:05+05:30", "1 day 02:03:04", "127.0.0.1", "10.0.0.0/8",
    "08:00:2b:01:02:03", "08:00:2b:01:02:03:04:05", "16/B374D848", "{\"a\": 1}", "a & b",
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "(1,2)", "((0,0),(1,1))", "[(0,0),(1,1)]",
    "<(1,2),3>", "{1,2,3}", "[1,2)", "{[1,2)}", "[2024-01-02,2024-01-03)",
    "{[2024-01-02,2024-01-03)}", "[\"2024-01-02 03:04:05\",\"2024-01-03 03:04:05\")",
    "{[\"2024-01-02 03:04:05\",\"2024-01-03 03:04:05\")}", "10:20:10,14,15", "$.a", "(1,x)",
    "a", "[a,b)", "{[a,b)}", "<x>1</x>", "YES", "{}", "-32768", "2147483647",
    "-9223372036854775808", "4294967295", "18446744073709551615", "NaN", "-Infinity",
    "123456.78", "1e-300", "-0", "\\x00ff", "1999-12-31 23:59:59.999999",
    "2024-02-29 23:59:59.999999-08", "24:00:00", "00:00:00+14", "x'y\\\"z,{}()",
)  # fmt: skip

#: Rows of values: row k has each type's k-th accepted literal (cycling through fewer).
ROWS = 6
#: Base types (after domains) that the README maps to a typed (non-string) Avro value.
TYPED = {"bool", "int2", "int4", "int8", "oid", "xid", "cid", "xid8", "float4", "float8",
         "date", "time", "timestamp", "timestamptz", "uuid", "bytea", "int2vector",
         "oidvector", "numeric82"}
SETTINGS = ("SET DateStyle = 'ISO'", "SET IntervalStyle = 'iso_8601'", "SET TimeZone = 'UTC'",
            "SET extra_float_digits = 1")


def _vector(text: str) -> list[int]:
    return [int(v) for v in text.split()]


# README "Values outside 0001-01-01 .. 9999-12-31": ±infinity clamps (timestamptz: a day inside).
_INFINITE = {"infinity": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
             "-infinity": dt.datetime(1, 1, 1)}
_INFINITE_TZ = {"infinity": dt.datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=dt.UTC),
                "-infinity": dt.datetime(1, 1, 3, tzinfo=dt.UTC)}
PARSE: dict[str, Any] = {
    "bool": lambda t: t == "t",  # boolout: t / f
    "int2": int, "int4": int, "int8": int, "oid": int, "xid": int, "cid": int,
    "xid8": Decimal, "numeric82": Decimal,
    "float4": float, "float8": float,
    "date": lambda t: _INFINITE[t].date() if t in _INFINITE else dt.date.fromisoformat(t),
    "time": lambda t: (dt.time(23, 59, 59, 999999) if t == "24:00:00"  # README: clamped
                       else dt.time.fromisoformat(t)),
    "timestamp": lambda t: _INFINITE.get(t) or dt.datetime.fromisoformat(t),
    "timestamptz": lambda t: _INFINITE_TZ.get(t) or dt.datetime.fromisoformat(t),
    "uuid": str, "bytea": lambda t: bytes.fromhex(t[2:]),
    "int2vector": _vector, "oidvector": _vector,
}  # fmt: skip


@dataclass
class Col:
    name: str  # the column's name: c<n>
    type_sql: str  # format_type()
    kind: str  # base, array, domain, enum, range, multirange, composite
    base: str  # the comparison: a key of PARSE, "money", or "string"
    array: bool
    literals: list[str] = field(default_factory=list)  # accepted, in CANDIDATES order

    def literal(self, row: int) -> str:
        return self.literals[row % len(self.literals)]


_KINDS = {"b": "base", "d": "domain", "e": "enum", "r": "range", "m": "multirange",
          "c": "composite"}


def _kind(typtype: str, is_array: bool, elem_typtype: str | None) -> str:
    if is_array:
        return f"array of {_KINDS[elem_typtype or 'b']}"
    return _KINDS[typtype]


def _catalog(conn: psycopg.Connection[Any], tag: str) -> list[tuple[Any, ...]]:
    """(oid, format_type, typtype, name of the base type after domains, element's base name,
    is_array, element's typtype) of each candidate type."""
    return conn.execute(
        """
        WITH RECURSIVE t AS (
          SELECT t.oid, t.typname, t.typtype, t.typbasetype, t.typelem, t.typinput, t.typrelid,
                 n.nspname
          FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
          WHERE t.typisdefined AND t.typtype <> 'p'
        ), base(oid, basename) AS (
          SELECT oid, CASE WHEN typname LIKE %(numeric82)s THEN 'numeric82' ELSE typname END
          FROM t WHERE typtype <> 'd'
          UNION ALL
          SELECT t.oid, CASE WHEN t.typname LIKE %(numeric82)s THEN 'numeric82'
                             ELSE b.basename END
          FROM t JOIN base b ON t.typbasetype = b.oid WHERE t.typtype = 'd'
        ), cand AS (
          SELECT t.*, t.typinput = 'array_in'::regproc AS is_array FROM t
          WHERE (t.nspname IN ('pg_catalog', 'information_schema')
                 OR t.typname LIKE %(mine)s)
        )
        SELECT c.oid, format_type(c.oid, NULL), c.typtype,
               (SELECT basename FROM base WHERE base.oid = c.oid LIMIT 1),
               (SELECT basename FROM base WHERE base.oid = c.typelem LIMIT 1),
               c.is_array, (SELECT e.typtype FROM t e WHERE e.oid = c.typelem)
        FROM cand c
        WHERE NOT (c.typtype = 'c' AND c.typname NOT LIKE %(mine)s)
          AND NOT (c.is_array AND EXISTS (SELECT 1 FROM t e WHERE e.oid = c.typelem
                   AND (e.typtype = 'p' OR (e.typtype = 'c' AND e.typname NOT LIKE %(mine)s))))
        ORDER BY c.oid
        """, {"mine": f"%{tag}%", "numeric82": f"%numeric82_{tag}%"}).fetchall()


def _make_user_types(conn: psycopg.Connection[Any], tag: str) -> None:
    for stmt in (f"CREATE TYPE mood_{tag} AS ENUM ('a', 'b', 'c')",
                 f"CREATE DOMAIN numeric82_{tag} AS numeric(8,2)",
                 f"CREATE TYPE pair_{tag} AS (a int, b text)",
                 f"CREATE TYPE moodrange_{tag} AS RANGE (subtype = mood_{tag}, "
                 f"multirange_type_name = moodmulti_{tag})"):
        conn.execute(stmt)


def _accepts(conn: psycopg.Connection[Any], stmt: str) -> bool:
    try:
        with conn.transaction():
            conn.execute(stmt)
        return True
    except psycopg.Error:
        return False


def _columns(conn: psycopg.Connection[Any], tag: str) -> tuple[list[Col], list[str]]:
    """The columns of the table, and the types skipped (with why)."""
    cols: list[Col] = []
    skipped: list[str] = []
    user = conn.execute("SELECT current_user").fetchone()
    assert user is not None
    candidates = (*CANDIDATES, f"=r/{user[0]}")  # aclitem: PUBLIC granted SELECT by us
    for oid, type_sql, typtype, basename, elembase, is_array, elem_typtype in _catalog(conn,
                                                                                       tag):
        kind = _kind(typtype, is_array, elem_typtype)
        probe = f"probe_{tag}"
        if not _accepts(conn, f"CREATE TEMP TABLE {probe} (c {type_sql})"):
            skipped.append(f"{type_sql}: not a column type")
            continue
        base = elembase if is_array else basename
        base = base if base in PARSE or base == "money" else "string"
        col = Col(f"c{len(cols)}", type_sql, kind, base, bool(is_array))
        for literal in candidates:
            text = literal
            if is_array:  # the array of the element's value and a NULL, through array_in
                elem_sql = conn.execute("SELECT format_type(typelem, NULL) FROM pg_type "
                                        "WHERE oid = %s", (oid,)).fetchone()
                assert elem_sql is not None
                stmt = sql.SQL("SELECT ARRAY[{}::{}, NULL]::text").format(
                    sql.Literal(literal), sql.SQL(elem_sql[0]))
                try:
                    with conn.transaction():
                        got = conn.execute(stmt).fetchone()
                except psycopg.Error:
                    continue
                assert got is not None
                text = got[0]
            # an INSERT, not a cast: assignment checks lengths (a cast to char(1) truncates)
            check = sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(probe),
                                                                 sql.Literal(text))
            if text not in col.literals and _accepts(conn, check.as_string(conn)):
                col.literals.append(text)
                if len(col.literals) == ROWS:
                    break
        conn.execute(f"DROP TABLE {probe}")
        if col.literals:
            cols.append(col)
        else:
            skipped.append(f"{type_sql}: no candidate literal accepted")
    return cols, skipped


def _expected(base: str, text: str | None) -> Any:
    if text is None:
        return None
    if base == "money":  # the README's exact amount: no currency symbol or group separators
        return re.sub(r"[^0-9.\-]", "", text)
    if base == "string":
        return text
    if base == "numeric82" and text == "NaN":
        return None  # README: numeric(p,s) NaN is null
    return PARSE[base](text)


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, Decimal):
        return (isinstance(got, Decimal) and got == want
                and got.as_tuple().exponent == want.as_tuple().exponent)
    if isinstance(want, float):
        if want != want:  # NaN
            return isinstance(got, float) and got != got
        return isinstance(got, float) and (got == want
                                           or abs(got - want) <= 1e-6 * abs(want))
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and all(_same(g, w) for g, w in zip(got, want, strict=True)))
    if want is not None and type(want) is str and not isinstance(got, str):
        return str(got) == want  # uuid: its canonical text
    return bool(got == want)


# format('%s', v) is v's output function (what pgoutput sends; a cast to text may differ:
# inet's adds the netmask, bool's spells true).
_ELEMENT_TEXTS = ("(SELECT array_agg(CASE WHEN {c}[i] IS NULL THEN NULL "
                  "ELSE format('%s', {c}[i]) END ORDER BY i) FROM generate_subscripts({c}, 1) i)")


def _oracle(conn: psycopg.Connection[Any], table: str,
            cols: list[Col]) -> dict[int, dict[str, Any]]:
    """Each row's expected Avro values by id, from the server's text output."""
    exprs = [sql.SQL(_ELEMENT_TEXTS if c.array else "format('%s', {c})").format(
        c=sql.Identifier(c.name)) for c in cols]
    found = conn.execute(sql.SQL("SELECT id, {} FROM {} WHERE id <> 2").format(
        sql.SQL(", ").join(exprs), sql.Identifier(table))).fetchall()
    return {row[0]: _row_oracle(cols, row[1:]) for row in found}


def _row_oracle(cols: list[Col], row: tuple[Any, ...]) -> dict[str, Any]:
    want: dict[str, Any] = {}
    for col, value in zip(cols, row, strict=True):
        if col.array:
            items: list[Any] = []
            for item in value:
                parsed = _expected(col.base, item)
                # arrays of vectors: an element's own values are not a sub-array (flattened)
                items.extend(parsed if isinstance(parsed, list) else [parsed])
            want[col.name] = items
        else:
            want[col.name] = _expected(col.base, value)
    return want


def test_every_catalog_type_streams_and_reads_back(postgres, producer_run, log_dir) -> None:
    port = free_port()
    run = producer_run("-", "--metrics-port", str(port))  # initial snapshot: the COPY path
    run.tables = f"public.*{run.tag}*"
    tag = run.tag
    table = f"every_{tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        for setting in SETTINGS:
            conn.execute(setting)
        _make_user_types(conn, tag)
        cols, skipped = _columns(conn, tag)
        version = conn.execute("SHOW server_version").fetchone()
        counts: dict[str, int] = {}
        for col in cols:
            counts[col.kind] = counts.get(col.kind, 0) + 1
        typed = sum(c.base != "string" for c in cols)
        print(f"PostgreSQL {version[0] if version else '?'}: {len(cols)} column types "
              f"({typed} typed, {len(cols) - typed} strings) {counts}; "
              f"{sum(len(c.literals) for c in cols)} values; "
              f"{len(skipped)} skipped: {skipped}")
        kinds = {"base", "domain", "enum", "range", "multirange", "composite"}
        assert kinds | {f"array of {k}" for k in kinds} <= counts.keys(), counts
        mine = [c for c in cols if tag in c.type_sql]
        assert len(mine) == 10, [c.type_sql for c in mine]  # 5 user types and their arrays
        conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, marker int, {})").format(
            sql.Identifier(table),
            sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.type_sql))
                               for c in cols)))
        conn.execute(sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(
            sql.Identifier(table)))
        names = sql.SQL(", ").join(sql.Identifier(c.name) for c in cols)

        def values(row: int) -> sql.Composable:
            return sql.SQL(", ").join(sql.Literal(c.literal(row)) for c in cols)

        conn.execute(sql.SQL("INSERT INTO {} (id, marker, {}) VALUES (3, 3, {})").format(
            sql.Identifier(table), names, values(0)))  # read by the initial snapshot
        run.start(log_dir)
        conn.execute(sql.SQL("INSERT INTO {} (id, marker, {}) VALUES {}").format(
            sql.Identifier(table), names, sql.SQL(", ").join(
                sql.SQL("({}, 1, {})").format(100 + k, values(k)) for k in range(ROWS))))
        conn.execute(sql.SQL("INSERT INTO {} (id, {}) VALUES (2, {})").format(  # no defaults
            sql.Identifier(table), names, sql.SQL(", ").join(sql.NULL for _ in cols)))
        conn.execute(sql.SQL("UPDATE {} SET marker = 2 WHERE id = 100").format(
            sql.Identifier(table)))
        want = _oracle(conn, table, cols)

    records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                           min_count=ROWS + 3)
    assert run.proc is not None and run.proc.poll() is None, (
        f"pgcdc run stopped: {run.output()[-3000:]}")
    events = [(r.value["op"], r.value["after"]["id"] if r.value["after"] else None)
              for r in records]
    assert events == [("r", 3), *(("c", 100 + k) for k in range(ROWS)), ("c", 2),
                      ("u", 100)], events

    by_name = {c.name: c for c in cols}
    fallbacks = re.findall(r"column '([^']+)' of \S+: value .* published as", run.output())
    unparsed = {k for r in records for k in (r.value.get("unparsed") or {})}
    samples = {k: v for k, v in scrape_metrics(port).items()
               if k.startswith("pgcdc_values_fallback_total") and v}
    named = sorted({n.removeprefix("before.") for n in [*fallbacks, *unparsed]})
    assert not named and not samples, "values fell back: " + "; ".join(
        f"{n} ({by_name[n].type_sql if n in by_name else '?'})" for n in named) + f" {samples}"

    mismatches = []
    snapshot, *inserted, nulls, updated = (r.value for r in records)
    images = [(snapshot["after"], "snapshot row 3", want[3]),
              *((r["after"], f"insert row {r['after']['id']}", want[r["after"]["id"]])
                for r in inserted),
              (updated["before"], "update before", want[100]),
              (updated["after"], "update after", want[100])]
    for image, label, wanted in images:
        for col in cols:
            got, expect = image[col.name], wanted[col.name]
            if col.base != "string" and got is None and expect is not None:
                mismatches.append(f"{label} {col.name} ({col.type_sql}): typed value is null")
            elif not _same(got, expect):
                mismatches.append(f"{label} {col.name} ({col.type_sql}): got {got!r}, "
                                  f"want {expect!r}")
    mismatches += [f"NULL row {c.name} ({c.type_sql}): got {nulls['after'][c.name]!r}"
                   for c in cols if nulls["after"][c.name] is not None]
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches)
    assert run.proc.poll() is None, f"pgcdc run stopped: {run.output()[-3000:]}"
