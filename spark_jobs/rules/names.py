"""Topic names ↔ tables, Avro field names → table column names, table → catalog name.

Every name the lake shows is decided here (one rule each):

* `column_names`: a column's name in the table, by default the PostgreSQL name where Delta
  accepts it without column mapping, with column mapping (`--column-mapping`) always the
  PostgreSQL name;
* `TableId.path`: the table's directory, the topic parts (connector/names.py);
* `catalog_table_name`: the table's name in the Spark catalog (`--database`).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from connector.names import from_topic_part, table_of_topic

# Characters Delta (without column mapping) refuses in column names.
_DELTA_BAD = re.compile(r"[ ,;{}()\n\t=]")
# A catalog name part used as it is: lower-case snake_case words, no escape-like `_xhhhh`.
_CATALOG_PLAIN = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*\Z")
_CATALOG_ESCAPE = re.compile(r"_x[0-9a-f]{4}|_u[0-9a-f]{6}")
_CATALOG_KEPT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
CONTROL_TOPICS = ("transaction", "message", "heartbeat")

# The job's own columns next to a table's row columns: the Delta table's metadata (the first
# four), the Parquet change log's (all of them), and nothing else while a batch is processed.
# `column_names` never gives a row column one of these names (ignoring case), so no PostgreSQL
# column can clash with them, in the lake or in the job's DataFrames.
OP, LSN, IDX, TS = "_cdc_op", "_cdc_commit_lsn", "_cdc_txn_index", "_cdc_ts_ms"
TOAST, DATE = "_cdc_toast", "_cdc_date"
PARTITION, OFFSET = "_kafka_partition", "_kafka_offset"
METADATA_COLUMNS = (OP, LSN, IDX, TS, TOAST, DATE, PARTITION, OFFSET)
_METADATA_LOWER = frozenset(m.lower() for m in METADATA_COLUMNS)


class TableId(NamedTuple):
    """A table as it appears in its topic name (`<prefix>.<schema part>.<table part>`).

    The parts are the producer's reversible topic encoding of the PostgreSQL names
    (connector/names.py), so distinct tables always have distinct paths."""

    schema: str
    table: str

    @property
    def path(self) -> str:
        """The table's directory under the lake root: `<schema part>/<table part>`."""
        return f"{self.schema}/{self.table}"

    @property
    def source_name(self) -> str:
        """The PostgreSQL `schema.table` the parts encode (for messages)."""
        return ".".join(map(from_topic_part, self))

    @property
    def catalog_name(self) -> str:
        """The table's name in the Spark catalog (`catalog_table_name`)."""
        return catalog_table_name(from_topic_part(self.schema), from_topic_part(self.table))


def q(name: str) -> str:
    """Backtick-quote a name (column, table, database) for Spark SQL: backticks doubled."""
    return "`" + name.replace("`", "``") + "`"


def subscribe_pattern(prefix: str) -> str:
    """Java regex for the table topics of a prefix: exactly two more dot-separated parts,
    which leaves out `<prefix>.transaction`, `.message` and `.heartbeat`."""
    return "^" + re.escape(prefix) + r"\.[^.]+\.[^.]+$"


def table_of(topic: str) -> TableId:
    """`<prefix>.<schema part>.<table part>` → TableId; the prefix may itself contain dots."""
    table_of_topic(topic)  # raises for anything but a table topic
    _, schema, table = topic.rsplit(".", 2)
    return TableId(schema, table)


def column_names(record: dict[str, Any], original: bool = False) -> dict[str, str]:
    """Avro field name → column name for a `Value`/`Key` record schema.

    The column is the original PostgreSQL name (`pg_name`) when Delta accepts it (any name with
    `original`, i.e. a table with column mapping; without it, no space or `,;{}()=`, tab or
    newline) and it does not collide case-insensitively (Spark resolves names
    case-insensitively) with another column; otherwise the Avro name is kept, so every column
    stays addressable.

    A column named like one of the job's `METADATA_COLUMNS` (ignoring case: `_cdc_op`,
    `_kafka_offset`...) takes its fully escaped name instead (`_x005Fcdc_x005Fop`, the Avro
    rule 2 encoding of schemas/README.md "Names", which `connector.names.from_avro_name`
    decodes): it is no Avro name of the record (a name that encodes to it by rule 2 is
    `_cdc_op`, which rule 1 keeps), and it is reserved before any `pg_name` is taken."""
    taken: set[str] = set(_METADATA_LOWER)
    out: dict[str, str] = {}
    fields = record.get("fields", [])
    for field in fields:
        avro = field["name"]
        taken.add(avro.lower())
        pg = field.get("pg_name", avro)
        if pg.lower() in _METADATA_LOWER or avro.lower() in _METADATA_LOWER:
            out[avro] = escaped_name(pg)
            taken.add(out[avro].lower())
    for field in fields:
        avro = field["name"]
        pg = field.get("pg_name", avro)
        if avro in out:
            continue
        if pg != avro and (original or not _DELTA_BAD.search(pg)) and pg.lower() not in taken:
            taken.add(pg.lower())
            out[avro] = pg
        else:
            out[avro] = avro
    return {field["name"]: out[field["name"]] for field in fields}


def escaped_name(pg_name: str) -> str:
    """Rule 2 of the Avro name encoding (schemas/README.md "Names") whatever the name: ASCII
    letters and non-leading digits stay, every other character becomes `_xHHHH` / `_uHHHHHH`.
    `_cdc_op` → `_x005Fcdc_x005Fop`; `connector.names.from_avro_name` reverses it."""
    return "".join(ch if ("a" <= ch.lower() <= "z" and ch.isascii())
                   or (i and ch.isascii() and ch.isdigit())
                   else f"_x{ord(ch):04X}" if ord(ch) <= 0xFFFF else f"_u{ord(ch):06X}"
                   for i, ch in enumerate(pg_name))


def _catalog_part(pg_name: str) -> str:
    if _CATALOG_PLAIN.match(pg_name) and _CATALOG_ESCAPE.search(pg_name) is None:
        return pg_name
    if not pg_name:
        raise ValueError("an empty name has no catalog name")
    return "".join(ch if ch in _CATALOG_KEPT else
                   f"_x{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"_u{ord(ch):06x}"
                   for ch in pg_name)


def catalog_table_name(schema: str, table: str) -> str:
    """`<schema>__<table>`, each PostgreSQL name kept when it is lower-case snake_case
    (`public__orders`, `sales__order_items`), otherwise with every character but a lower-case
    ASCII letter or a digit escaped as `_xhhhh` / `_uhhhhhh` (lower-case hex):
    `"Order Items"` -> `_x004frder_x0020_x0049tems`.

    Injective even in catalogs that fold names to lower case (Spark's session catalog, Hive):
    a part is `[a-z0-9_]` only, never contains `__` and never ends with `_`, so the first `__`
    separates schema and table; a kept part has no escape, and an escaped part has `_` only
    where an escape starts, so replacing the escapes gives the PostgreSQL name back.
    Backquote it in SQL when it starts with a digit (the job always does).
    """
    return f"{_catalog_part(schema)}__{_catalog_part(table)}"


def catalog_name_parts(name: str) -> tuple[str, str]:
    """The (schema, table) `catalog_table_name` made `name` from (its inverse)."""
    schema, sep, table = name.partition("__")
    if not sep or not schema or not table:
        raise ValueError(f"{name!r} is not a catalog table name <schema>__<table>")

    def decode(part: str) -> str:
        return _CATALOG_ESCAPE.sub(lambda m: chr(int(m[0][2:], 16)), part)
    return decode(schema), decode(table)
