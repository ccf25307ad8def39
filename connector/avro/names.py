"""PostgreSQL names -> Avro names (reversibly) and -> Kafka topic names.

Avro names must match ``[A-Za-z_][A-Za-z0-9_]*``. The rule (also in schemas/README.md, "Names"):

1. A PostgreSQL name that matches ``[A-Za-z_][A-Za-z0-9_]*`` and contains no *escape*
   (``_x`` followed by 4 upper-case hex digits, or ``_u`` followed by 6) is used unchanged:
   ``id``, ``order_id``, ``_private``, ``CamelCase``.
2. Any other name is encoded character by character: ASCII letters stay; digits stay except
   in first position; every other character -- ``_`` included -- becomes ``_xHHHH`` (its code
   point, 4 upper-case hex digits) or, above U+FFFF, ``_uHHHHHH`` (6 digits).
   ``order date`` -> ``order_x0020date``, ``1st`` -> ``_x0031st``, ``a_b-c`` ->
   ``a_x005Fb_x002Dc``, ``Größe`` -> ``Gr_x00F6_x00DFe``.

Decoding (`from_avro_name`): a name without any escape is returned unchanged (rule 1);
otherwise every escape is replaced by its character. Rule 1 excludes names containing an
escape, and rule 2 escapes every ``_``, so the two images are disjoint and the mapping is
injective: distinct column names never collide. PostgreSQL names are never empty.

Topic names (`topic_part`) follow the contract's rule instead: every character outside
``[A-Za-z0-9_-]`` becomes ``_`` -- readable but not reversible; the original names travel in
``source.schema`` / ``source.table`` of every event.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["from_avro_name", "is_avro_name", "namespace_of", "table_topic", "to_avro_name",
           "topic_part"]

_VALID: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ESCAPE: Final = re.compile(r"_x([0-9A-F]{4})|_u([0-9A-F]{6})")
_TOPIC_BAD: Final = re.compile(r"[^A-Za-z0-9_-]")
_ASCII_LETTERS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DIGITS: Final = frozenset("0123456789")


def is_avro_name(name: str) -> bool:
    """True if `name` is a valid Avro name (one component, no dots)."""
    return _VALID.match(name) is not None


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"_x{code:04X}" if code <= 0xFFFF else f"_u{code:06X}"


def to_avro_name(pg_name: str) -> str:
    """The Avro name of a PostgreSQL identifier (column, schema, table, prefix component)."""
    if _VALID.match(pg_name) and _ESCAPE.search(pg_name) is None:
        return pg_name
    if not pg_name:
        raise ValueError("an empty name has no Avro name")
    out = []
    for i, ch in enumerate(pg_name):
        if ch in _ASCII_LETTERS or (i and ch in _DIGITS):
            out.append(ch)
        else:
            out.append(_escape(ch))
    return "".join(out)


def _unescape(match: re.Match[str]) -> str:
    return chr(int(match[1] or match[2], 16))


def from_avro_name(avro_name: str) -> str:
    """The PostgreSQL name `to_avro_name` made `avro_name` from (its exact inverse)."""
    if _ESCAPE.search(avro_name) is None:
        return avro_name
    return _ESCAPE.sub(_unescape, avro_name)


def namespace_of(prefix: str, *names: str) -> str:
    """A dotted Avro namespace: each dot-separated component of the prefix, then each name
    (one component each, dots and all), made a valid Avro name.

    ``namespace_of("prod.cdc", "public", "order items")`` -> ``prod.cdc.public.order_x0020items``
    """
    return ".".join([*(to_avro_name(c) for c in prefix.split(".")),
                     *(to_avro_name(n) for n in names)])


def topic_part(pg_name: str) -> str:
    """A schema or table name as it appears in a topic name (contract: not reversible)."""
    return _TOPIC_BAD.sub("_", pg_name)


def table_topic(prefix: str, schema: str, table: str) -> str:
    """``<prefix>.<schema>.<table>`` with schema and table sanitized per the contract."""
    return f"{prefix}.{topic_part(schema)}.{topic_part(table)}"
