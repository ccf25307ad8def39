"""Topic names ↔ tables, and Avro field names → table column names."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

# Characters Delta (without column mapping) refuses in column names.
_DELTA_BAD = re.compile(r"[ ,;{}()\n\t=]")
CONTROL_TOPICS = ("transaction", "message", "heartbeat")


class TableId(NamedTuple):
    """A table as it appears in its topic name (`<prefix>.<schema>.<table>`)."""

    schema: str
    table: str

    @property
    def path(self) -> str:
        return f"{self.schema}/{self.table}"


def subscribe_pattern(prefix: str) -> str:
    """Java regex for the table topics of a prefix: exactly two more dot-separated parts,
    which leaves out `<prefix>.transaction`, `.message` and `.heartbeat`."""
    return "^" + re.escape(prefix) + r"\.[^.]+\.[^.]+$"


def table_of(topic: str) -> TableId:
    """`<prefix>.<schema>.<table>` → TableId; the prefix may itself contain dots."""
    parts = topic.split(".")
    if len(parts) < 3 or not parts[-1] or not parts[-2]:
        raise ValueError(f"topic {topic!r} is not a table topic <prefix>.<schema>.<table>")
    return TableId(parts[-2], parts[-1])


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
