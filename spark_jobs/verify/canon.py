"""Canonical row text for `pgcdc verify`: one SQL expression per column on each side
(PostgreSQL and Spark SQL) giving the same text for the same value, so each side can hash its
rows where they are and only the hashes travel.

Per column, by PostgreSQL type and the lake type the merge job gives it (schemas/README.md,
docs/merge-internals.md "One micro-batch", lake types):

| PostgreSQL | lake | canonical text |
|---|---|---|
| bool | boolean | `true` / `false` |
| int2, int4, int8, oid | int / bigint | decimal digits |
| text, varchar, name, "char", enum, citext | string | the text |
| bpchar | string | the text with its padding (as pgoutput sends it) |
| numeric(p,s) | decimal | PostgreSQL's text (scale digits kept); `NaN` is NULL (as in the lake) |
| numeric (unbounded) | string | PostgreSQL's text, `NaN`/`Infinity` included |
| uuid | string | lower-case text |
| bytea | binary | lower-case hex |
| date | date | `YYYY-MM-DD`, clamped to 0001-01-01 .. 9999-12-31 (`±infinity`, BC dates) |
| timestamp | timestamp_ntz | `YYYY-MM-DD HH:MM:SS.ffffff`, clamped like the events |
| timestamptz | timestamp | the same in UTC, clamped to 0001-01-03 .. 9999-12-30 23:59:59.999999 |
| time | bigint | microseconds since midnight (`24:00` is 86399999999, as in the events) |
| others the lake holds as strings: json(b), interval, inet, timetz, bit, ranges... | string |
  the type's output text (`format('%s', c)`: `inet::text` would add `/32`; IntervalStyle
  iso_8601) |

Every other type (float4/float8, arrays, money) is compared **directly**: both sides' values
of those columns are read and compared with `spark_jobs.verify.compare.normalize` (their texts
differ between PostgreSQL and Spark: `1e+100` vs `1.0E100`, array syntax; money's text depends on
lc_monetary). A lake column whose type is not the one
the table above expects (a retyped column) is compared directly too.

A row's text joins its columns' texts as `V<length>:<text>` (NULL: `N`) with `|`: the length
prefix makes it unambiguous. Its hash is the first 64 bits of md5, as a signed bigint on both
sides; a range of rows is summarised by count, bit_xor and (exact) sum of those hashes. Ranges
are **hash ranges of the key**: range = first 32 bits of md5(key text) mod N. Key ranges by
value boundaries would need the same ordering on both sides for every key type (PostgreSQL
collations, clamped timestamps, floats) and a boundary query; hash ranges need only the key
text, and each side computes every range in one scan (`GROUP BY`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TS_FORMAT_PG = "YYYY-MM-DD HH24:MI:SS.US"
TS_FORMAT_SPARK = "yyyy-MM-dd HH:mm:ss.SSSSSS"
_TEXT_TYPES = frozenset({"text", "varchar", "name", "char", "citext"})
_INT_TYPES = frozenset({"int2", "int4", "int8", "oid"})
# Types the lake holds as typed values (and money, whose text depends on lc_monetary): a
# string lake column of one of them is a retyped column, compared directly.
_TYPED = _INT_TYPES | {"bool", "bytea", "date", "timestamp", "timestamptz", "time", "float4",
                       "float8", "money", "xid8"}


# The type's output function's text (format() gives '' for NULL, so NULL is kept apart).
_OUTPUT_TEXT = "CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END"


@dataclass(frozen=True)
class PgColumn:
    name: str
    type: str  # pg_type.typname of the base type (a domain's base type)
    enum: bool = False


@dataclass(frozen=True)
class Rule:
    """How one column becomes text: `{c}` in each template is the quoted column."""

    pg: str
    spark: str


def _rule(pg: str, spark: str = "cast({c} as string)") -> Rule:
    return Rule(pg, spark)


def column_rule(column: PgColumn, lake_type: str) -> Rule | None:
    """The column's canonical-text rule, or None: compare it directly (see the module doc).
    `lake_type` is the lake column's Spark type (`DataType.simpleString()`)."""
    t = column.type
    if t == "bool" and lake_type == "boolean":
        return _rule("{c}::text")
    if t in _INT_TYPES and lake_type in ("smallint", "int", "bigint"):
        return _rule("{c}::text")
    if (t in _TEXT_TYPES or column.enum) and lake_type == "string":
        return _rule("{c}::text", "{c}")
    if t == "bpchar" and lake_type == "string":
        return _rule(_OUTPUT_TEXT, "{c}")  # ::text would drop the padding
    if t == "numeric" and lake_type.startswith("decimal"):
        return _rule("CASE WHEN {c} = 'NaN' THEN NULL ELSE {c}::text END")
    if t == "numeric" and lake_type == "string":
        return _rule("{c}::text", "{c}")
    if t == "uuid" and lake_type == "string":
        return _rule("{c}::text", "{c}")
    if t == "bytea" and lake_type == "binary":
        return _rule("encode({c}, 'hex')", "lower(hex({c}))")
    if t == "date" and lake_type == "date":
        return _rule("CASE WHEN {c} > date '9999-12-31' THEN '9999-12-31'"
                     " WHEN {c} < date '0001-01-01' THEN '0001-01-01' ELSE to_char({c},"
                     " 'YYYY-MM-DD') END")
    if t == "timestamp" and lake_type == "timestamp_ntz":
        return _rule(f"to_char(CASE WHEN {{c}} > timestamp '9999-12-31 23:59:59.999999' THEN"
                     " timestamp '9999-12-31 23:59:59.999999' WHEN {c} < timestamp"
                     f" '0001-01-01' THEN timestamp '0001-01-01' ELSE {{c}} END, '{TS_FORMAT_PG}')",
                     f"date_format({{c}}, '{TS_FORMAT_SPARK}')")
    if t == "timestamptz" and lake_type == "timestamp":
        return _rule("to_char((CASE WHEN {c} > timestamptz '9999-12-30 23:59:59.999999+00' THEN"
                     " timestamptz '9999-12-30 23:59:59.999999+00' WHEN {c} < timestamptz"
                     " '0001-01-03 00:00:00+00' THEN timestamptz '0001-01-03 00:00:00+00'"
                     f" ELSE {{c}} END) AT TIME ZONE 'UTC', '{TS_FORMAT_PG}')",
                     f"date_format({{c}}, '{TS_FORMAT_SPARK}')")
    if t == "time" and lake_type == "bigint":
        # (least() ignores NULL: the CASE keeps a NULL time NULL)
        return _rule("CASE WHEN {c} IS NULL THEN NULL ELSE least((extract(epoch FROM {c})"
                     " * 1000000)::bigint, 86399999999)::text END")
    if lake_type == "string" and t not in _TYPED:
        # The lake holds the type's output text; ::text is not always it (inet shows /32).
        return _rule(_OUTPUT_TEXT, "{c}")
    return None


@dataclass(frozen=True)
class TableCanon:
    """One table's canonical expressions. `hashed` and `direct` are PostgreSQL column names;
    `lake` maps each to its lake column."""

    key: tuple[str, ...]
    hashed: tuple[str, ...]
    direct: tuple[str, ...]
    rules: dict[str, Rule]
    lake: dict[str, str]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.hashed + self.direct


class KeyNotHashable(ValueError):
    """A key column whose type has no canonical text: the table cannot be range-hashed."""


def table_canon(columns: Sequence[PgColumn], key: Sequence[str], lake_types: dict[str, str],
                lake_names: dict[str, str]) -> TableCanon:
    """Rules for the PostgreSQL columns present in the lake (`lake_names`: PostgreSQL name →
    lake name; `lake_types`: lake name → Spark type)."""
    rules: dict[str, Rule] = {}
    direct: list[str] = []
    for column in columns:
        if column.name not in lake_names:
            continue
        rule = column_rule(column, lake_types[lake_names[column.name]])
        if rule is None:
            direct.append(column.name)
        else:
            rules[column.name] = rule
    for k in key:
        if k not in rules:
            raise KeyNotHashable(f"key column {k!r} has a type compared only directly")
    hashed = tuple(c.name for c in columns if c.name in rules)
    return TableCanon(tuple(key), hashed, tuple(direct), rules,
                      {c: lake_names[c] for c in hashed + tuple(direct)})


def pg_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def spark_quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def pg_text(canon: TableCanon, column: str) -> str:
    return canon.rules[column].pg.format(c=pg_quote(column))


def spark_text(canon: TableCanon, column: str) -> str:
    return canon.rules[column].spark.format(c=spark_quote(canon.lake[column]))


def pg_joined(canon: TableCanon, columns: Sequence[str]) -> str:
    """PostgreSQL: the `V<length>:<text>|...` text of `columns`."""
    parts = []
    for c in columns:
        t = pg_text(canon, c)
        parts.append(f"coalesce('V' || length({t})::text || ':' || {t}, 'N')")
    return "concat_ws('|', " + ", ".join(parts) + ")"


def spark_joined(canon: TableCanon, columns: Sequence[str]) -> str:
    """Spark SQL: the same text as `pg_joined`."""
    parts = []
    for c in columns:
        t = spark_text(canon, c)
        parts.append(f"coalesce(concat('V', cast(length({t}) as string), ':', {t}), 'N')")
    return "concat_ws('|', " + ", ".join(parts) + ")"


def pg_bucket(key_text: str, ranges: int) -> str:
    return f"mod(('x' || substr(md5({key_text}), 1, 8))::bit(32)::bigint, {ranges})"


def spark_bucket(key_text: str, ranges: int) -> str:
    return f"pmod(cast(conv(substr(md5({key_text}), 1, 8), 16, 10) as bigint), {ranges})"


def pg_hash(row_text: str) -> str:
    return f"('x' || substr(md5({row_text}), 1, 16))::bit(64)::bigint"


def spark_hash(row_text: str) -> str:
    return (f"(shiftleft(cast(conv(substr(md5({row_text}), 1, 8), 16, 10) as bigint), 32)"
            f" | cast(conv(substr(md5({row_text}), 9, 8), 16, 10) as bigint))")


def key_text(values: Sequence[str | None]) -> str:
    """The key text of canonical key column texts, as both SQL sides build it."""
    return "|".join("N" if v is None else f"V{len(v)}:{v}" for v in values)
