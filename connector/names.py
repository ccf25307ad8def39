"""PostgreSQL names -> Avro names and Kafka topic names, both reversibly.

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

Topic names (`topic_part`, `table_topic`) use the same two rules over Kafka's alphabet
``[A-Za-z0-9_-]`` (the dot is kept out: it separates prefix, schema and table):

1. A name of ``[A-Za-z0-9_-]`` characters with no escape is used unchanged: ``orders``,
   ``order_items``, ``s-1``, ``2024_archive``.
2. Any other name keeps ASCII letters, digits and ``-``; every other character -- ``_``
   included -- becomes its escape: ``x y`` -> ``x_x0020y``, ``a.b`` -> ``a_x002Eb``,
   ``Größe`` -> ``Gr_x00F6_x00DFe``.

So the topic of a table is injective: two distinct (schema, table) pairs never share a topic,
a subject or a lake path (the merge job's path is ``<schema part>/<table part>``), and
`table_of_topic` gives the PostgreSQL names back. A topic longer than Kafka's 249 characters is
refused (`TopicNameTooLong`) before anything is published.

This module is pure (standard library only): the merge job (spark_jobs/rules/names.py)
imports it, so both sides apply one rule.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Final, NamedTuple

from connector.errors import ConfigError

__all__ = ["MAX_TOPIC_LENGTH", "SIGNAL_TABLE", "TableName", "TopicNameTooLong", "from_avro_name",
           "from_topic_part", "is_avro_name", "namespace_of", "table_of_topic", "table_topic",
           "to_avro_name", "topic_part"]

_VALID: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ESCAPE: Final = re.compile(r"_x([0-9A-F]{4})|_u([0-9A-F]{6})")
_TOPIC_PLAIN: Final = re.compile(r"[A-Za-z0-9_-]+\Z")
_TOPIC_KEPT: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
#: Kafka's limit on a topic name (kafka.common.internals.Topic.MAX_NAME_LENGTH).
MAX_TOPIC_LENGTH: Final = 249


class TableName(NamedTuple):
    """A table's identity: compare, hash and key tables by this pair, never by the text
    ``schema.table``, which is ambiguous once a name contains a dot (schema ``a.b`` table ``c``
    and schema ``a`` table ``b.c`` print alike). `str()` is that text, for display only."""

    schema: str
    table: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"

    @classmethod
    def readings(cls, text: str) -> list[TableName]:
        """Every table the display text ``schema.table`` may name (one per dot in it), for a
        text stored before it could be a pair: the catalog tells which one exists."""
        return [cls(text[:i], text[i + 1:]) for i, char in enumerate(text) if char == "."]


#: pgcdc's own signal table (connector/snapshot/incremental/signals.py). Its rows are pgcdc's
#: requests and progress, never a user table's changes: no publication pgcdc manages lists it,
#: and when a FOR ALL TABLES publication does publish it, the producer drops its changes before
#: Kafka (connector/publisher.py) and the initial snapshot skips it, so it gets no topic.
SIGNAL_TABLE: Final = TableName("public", "pgcdc_signal")


class TopicNameTooLong(ConfigError):
    """The topic of a table would exceed Kafka's limit (prefix, schema and table too long)."""
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
    """A schema or table name as it appears in a topic name (reversible, see the module doc)."""
    if _TOPIC_PLAIN.match(pg_name) and _ESCAPE.search(pg_name) is None:
        return pg_name
    if not pg_name:
        raise ValueError("an empty name has no topic part")
    return "".join(ch if ch in _TOPIC_KEPT else _escape(ch) for ch in pg_name)


def from_topic_part(part: str) -> str:
    """The PostgreSQL name `topic_part` made `part` from (its exact inverse)."""
    return from_avro_name(part)  # same escapes; an unescaped part is the name itself


def table_topic(prefix: str, schema: str, table: str) -> str:
    """``<prefix>.<schema part>.<table part>``; raises `TopicNameTooLong` past Kafka's limit."""
    topic = f"{prefix}.{topic_part(schema)}.{topic_part(table)}"
    if len(topic) > MAX_TOPIC_LENGTH:
        raise TopicNameTooLong(
            f"table {schema}.{table} would need a topic of {len(topic)} characters, more than "
            f"Kafka's {MAX_TOPIC_LENGTH}: use a shorter --topic-prefix or rename the table")
    return topic


def pattern_matches(pattern: str, schema: str, table: str) -> bool:
    """Whether a ``schema.table`` pattern as in ``--tables`` (``*`` and ``?``; no schema:
    ``public``) matches the table."""
    schema_pat, _, table_pat = pattern.rpartition(".")
    return fnmatch.fnmatchcase(schema, schema_pat or "public") and \
        fnmatch.fnmatchcase(table, table_pat)


def table_of_topic(topic: str) -> tuple[str, str]:
    """(schema, table) of a table topic ``<prefix>.<schema part>.<table part>`` (the prefix may
    contain dots; the parts never do). Raises ValueError for any other topic."""
    parts = topic.split(".")
    if len(parts) < 3 or not parts[-1] or not parts[-2]:
        raise ValueError(f"topic {topic!r} is not a table topic <prefix>.<schema>.<table>")
    return from_topic_part(parts[-2]), from_topic_part(parts[-1])
