"""The one rule for a value a column's mapping cannot take: it never stops the stream, and it
is never lost.

A value that its column's loader, converter or Avro encoder refuses (a form pgtypes does not
parse, a number its Avro type cannot hold) is published anyway, losslessly, with one warning
per column (the first time) and the counter ``pgcdc_values_fallback_total{table,column}``.
Its **exact text** is what PostgreSQL sent (`exact_text`: a binary tuple's value is ``\\x``
and the hex of its bytes, as `datums.to_string` writes unknown binary values):

* a column whose Avro type is a plain ``string`` (every type whose mapping can fail on a value
  PostgreSQL stores is one in the first place: unknown, user and string-category types, ranges,
  composites...) carries the exact text in place;
* a column of a typed mapping (numbers, dates, decimals, arrays...) cannot hold a text in its
  Avro type, so it is **null** in that row and the Envelope's ``unparsed`` map carries the
  exact text, under the column's Avro field name for a value of ``after`` and under
  ``before.`` + that name for a value of ``before`` (`unparsed_name`). The typed mappings are
  total over what PostgreSQL can store (each is proven against real servers in
  tests/integration), so this branch means a bug to report, not a value to expect. (The Kafka
  key has no such map: a typed key column falling back is null in the key, and its text is in
  the value's ``unparsed``.)

The column types never change for a fallback: what is published always fits the column's
declared type, and ``unparsed`` is one optional field of every Envelope (null when nothing fell
back: one byte). The hot paths do not pay for it: the Python row loop has one ``try`` per
column (free in CPython 3.11 until something raises), and the C row encoder already declines
anything but canonical text to the Python piece, which applies the same rule and hands the C
side the exact text to list (`native_rows`).
"""

from __future__ import annotations

import logging
from typing import Any

from connector import metrics

__all__ = ["BEFORE", "admits_text", "exact_text", "fallback_datum", "report_fallback",
           "unparsed_name"]

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()
BEFORE = "before."  # prefix of an `unparsed` name for a value of `before`
_SHOWN = 200


def admits_text(avro_type: Any) -> bool:
    """Whether a column of `avro_type` can carry a value's exact text: a plain string
    (json's ``connect.name`` is only an attribute); uuid's logical type is not (readers parse
    it)."""
    if avro_type == "string":
        return True
    return (isinstance(avro_type, dict) and avro_type.get("type") == "string"
            and "logicalType" not in avro_type)


def exact_text(raw: Any) -> str:
    """A value as pgoutput or COPY sent it (`raw`): its text, or a binary value's ``\\x`` +
    hex."""
    if isinstance(raw, str):
        return raw
    return "\\x" + bytes(raw).hex()


def fallback_datum(avro_type: Any, raw: Any) -> str | None:
    """What a column of `avro_type` publishes in the row for a value (`raw`: as pgoutput or COPY
    sent it) its mapping refused: its exact text, or None when the type cannot hold a text (the
    text then goes to ``unparsed``)."""
    return exact_text(raw) if admits_text(avro_type) else None


def unparsed_name(avro_name: str, before: bool) -> str:
    """The ``unparsed`` key of a column's value: its Avro field name in `after`, ``before.`` +
    it in `before` (an Avro name has no dot: no clash)."""
    return BEFORE + avro_name if before else avro_name


def report_fallback(table: str, column: str, avro_type: Any, raw: Any,
                    exc: BaseException) -> None:
    """Count a fallback, and warn the first time for this column (`table`: ``schema.table``)."""
    metrics.VALUES_FALLBACK.labels(table, column).inc()
    if (table, column) in _warned:
        return
    _warned.add((table, column))
    shown = repr(raw if isinstance(raw, str) else bytes(raw))
    shown = shown[:_SHOWN] + "..." if len(shown) > _SHOWN else shown
    outcome = ("published as its exact text" if admits_text(avro_type)
               else f"published as null, its exact text in `unparsed` (Avro type "
                    f"{avro_type} cannot hold it)")
    log.warning("column %r of %s: value %s %s: %s: %s (further values of this column that "
                "fall back are only counted in pgcdc_values_fallback_total)", column, table,
                shown, outcome, type(exc).__name__, exc)
