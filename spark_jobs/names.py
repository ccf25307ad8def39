"""Topic names ↔ tables, and Avro field names → table column names."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from connector.names import from_topic_part, table_of_topic

# Characters Delta (without column mapping) refuses in column names.
_DELTA_BAD = re.compile(r"[ ,;{}()\n\t=]")
CONTROL_TOPICS = ("transaction", "message", "heartbeat")


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


def subscribe_pattern(prefix: str) -> str:
    """Java regex for the table topics of a prefix: exactly two more dot-separated parts,
    which leaves out `<prefix>.transaction`, `.message` and `.heartbeat`."""
    return "^" + re.escape(prefix) + r"\.[^.]+\.[^.]+$"


def table_of(topic: str) -> TableId:
    """`<prefix>.<schema part>.<table part>` → TableId; the prefix may itself contain dots."""
    table_of_topic(topic)  # raises for anything but a table topic
    _, schema, table = topic.rsplit(".", 2)
    return TableId(schema, table)


def column_names(record: dict[str, Any]) -> dict[str, str]:
    """Avro field name → column name for a `Value`/`Key` record schema.

    The column is the original PostgreSQL name (`pg_name`) when Delta accepts it and it does not
    collide case-insensitively (Spark resolves names case-insensitively) with another column;
    otherwise the Avro name is kept, so every column stays addressable."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    fields = record.get("fields", [])
    for field in fields:
        taken.add(field["name"].lower())
    for field in fields:
        avro = field["name"]
        pg = field.get("pg_name", avro)
        if pg != avro and not _DELTA_BAD.search(pg) and pg.lower() not in taken:
            taken.add(pg.lower())
            out[avro] = pg
        else:
            out[avro] = avro
    return out
