"""The session settings under which PostgreSQL prints every value pgcdc reads as text.

A text value is the type's output function's, run in the session that reads it: the walsender
of the replication stream (pgoutput's text tuples), the initial snapshot's readers and the
incremental snapshot's reader (COPY text). Some output functions depend on the session:
timestamptz on ``TimeZone``, date and timestamps on ``DateStyle``, interval on
``IntervalStyle``, float4/float8 on ``extra_float_digits``, bytea on ``bytea_output`` (money
on ``lc_monetary``, left to the database's default: its amount is read from either form). A
walsender, like any session, starts with the database's and role's defaults (``ALTER DATABASE
... SET``), so each of those connections pins `OUTPUT_SETTINGS` first: the loaders get one
form, and a masked value (connector/avro/masking.py), a function of that text, is the same
whichever path read the row, whatever the database's defaults (docs/publishing.md, Reproducing
a hash).
"""

from __future__ import annotations

from typing import Final

__all__ = ["OUTPUT_SETTINGS", "OUTPUT_STATEMENTS"]

#: (setting, value) pinned on every connection whose text values pgcdc reads.
OUTPUT_SETTINGS: Final = (("TimeZone", "UTC"), ("DateStyle", "ISO"),
                          ("IntervalStyle", "iso_8601"), ("extra_float_digits", "3"),
                          ("bytea_output", "hex"))
#: The same as SET statements (a replication connection takes SET, not set_config()).
OUTPUT_STATEMENTS: Final = tuple(f"SET {name} = '{value}'" for name, value in OUTPUT_SETTINGS)
