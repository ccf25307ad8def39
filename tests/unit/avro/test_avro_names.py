"""Avro names: valid, reversible, injective; topic names per the contract."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from connector.names import (
    TopicNameTooLong,
    from_avro_name,
    is_avro_name,
    namespace_of,
    table_of_topic,
    table_topic,
    to_avro_name,
    topic_part,
)
from spark_jobs.rules.names import table_of

AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# PostgreSQL identifiers: any characters but NUL (and no surrogates, being UTF-8), never empty.
pg_names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                   min_size=1, max_size=70)
# Names built from pieces of escapes, to hit the ambiguous-looking cases often.
tricky = st.lists(st.sampled_from(["_", "x", "u", "0", "5", "F", "A", "a", " ", "-", ".", "é",
                                   "\U0001F600", "_x0041", "_x005F", "_u01F600"]),
                  min_size=1, max_size=8).map("".join)


@pytest.mark.parametrize(("pg", "avro"), [
    ("id", "id"),
    ("order_id", "order_id"),
    ("_private", "_private"),
    ("CamelCase", "CamelCase"),
    ("order date", "order_x0020date"),
    ("1st", "_x0031st"),
    ("a_b-c", "a_x005Fb_x002Dc"),
    ("Größe", "Gr_x00F6_x00DFe"),
    ("emoji\U0001F600", "emoji_u01F600"),
    ("a_x0041", "a_x005Fx0041"),  # looks like an escape: encoded so it cannot be misread
    ("a.b", "a_x002Eb"),
    ("_", "_"),
    ("9", "_x0039"),
])
def test_documented_examples(pg: str, avro: str) -> None:
    assert to_avro_name(pg) == avro
    assert from_avro_name(avro) == pg


@given(pg_names)
@example("_x0041")
@example("_x004")
@example("x0041")
@example("_u01F600")
@example("é_x00E9")
def test_round_trip_and_valid(name: str) -> None:
    avro = to_avro_name(name)
    assert AVRO_NAME.match(avro), avro
    assert is_avro_name(avro)
    assert from_avro_name(avro) == name


@given(tricky)
def test_round_trip_of_escape_lookalikes(name: str) -> None:
    avro = to_avro_name(name)
    assert AVRO_NAME.match(avro)
    assert from_avro_name(avro) == name


@given(st.lists(st.one_of(pg_names, tricky), min_size=2, max_size=20, unique=True))
def test_injective(names: list[str]) -> None:
    encoded = [to_avro_name(n) for n in names]
    assert len(set(encoded)) == len(names)


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]*", fullmatch=True))
def test_valid_names_without_escapes_are_unchanged(name: str) -> None:
    if re.search(r"_x[0-9A-F]{4}|_u[0-9A-F]{6}", name) is None:
        assert to_avro_name(name) == name


def test_empty_name_is_rejected() -> None:
    with pytest.raises(ValueError):
        to_avro_name("")


def test_namespace_splits_dotted_prefix() -> None:
    assert namespace_of("prod.cdc", "public", "order items") == "prod.cdc.public.order_x0020items"
    assert namespace_of("my-prefix", "s", "t") == "my_x002Dprefix.s.t"
    for part in namespace_of("a.b-c", "Ünïcode", "1t").split("."):
        assert is_avro_name(part)


def _topic_or_refused(prefix: str, schema: str, table: str) -> str | None:
    try:
        topic = table_topic(prefix, schema, table)
    except TopicNameTooLong:
        assert len(f"{prefix}.{topic_part(schema)}.{topic_part(table)}") > 249
        return None
    assert len(topic) <= 249
    return topic


@pytest.mark.parametrize(("schema", "table", "topic"), [
    ("public", "orders", "shop.public.orders"),
    ("public", "order_items", "shop.public.order_items"),
    ("s-1", "2024_archive", "shop.s-1.2024_archive"),
    ("my schema", "order.items", "shop.my_x0020schema.order_x002Eitems"),
    ("s-1", "Größe", "shop.s-1.Gr_x00F6_x00DFe"),
    ("_x", "a$b", "shop._x.a_x0024b"),
    ("public", "a_x0041", "shop.public.a_x005Fx0041"),  # an escape look-alike is escaped
])
def test_table_topic(schema: str, table: str, topic: str) -> None:
    assert table_topic("shop", schema, table) == topic
    assert table_of_topic(topic) == (schema, table)


@given(pg_names, pg_names)
def test_table_topic_has_exactly_two_dots_after_prefix(schema: str, table: str) -> None:
    topic = _topic_or_refused("pre.fix", schema, table)
    if topic is None:
        return
    assert re.fullmatch(r"pre\.fix\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", topic)
    assert table_of_topic(topic) == (schema, table)


@given(st.one_of(pg_names, tricky), st.one_of(pg_names, tricky),
       st.one_of(pg_names, tricky), st.one_of(pg_names, tricky))
@example("public", "x y", "public", "x_y")
@example("public", "a.b", "public", "a_b")
@example("public", "größe", "public", "gr__e")
@example("a", "b_c", "a_b", "c")
def test_distinct_tables_never_share_a_topic_or_lake_path(s1: str, t1: str, s2: str,
                                                          t2: str) -> None:
    """The data-loss case: two tables mapped to one topic would be merged into one Delta
    table. Any two distinct (schema, table) pairs give distinct topics and lake paths."""
    if (s1, t1) == (s2, t2):
        return
    topic1, topic2 = _topic_or_refused("p", s1, t1), _topic_or_refused("p", s2, t2)
    if topic1 is None or topic2 is None:
        return  # refused up front: nothing is published for that table
    assert topic1 != topic2
    assert table_of(topic1).path != table_of(topic2).path


def test_plain_topic_names_are_unchanged() -> None:
    """Topics of existing deployments keep their names (names of [A-Za-z0-9_-])."""
    for name in ("orders", "order_items", "Orders", "s-1", "_t", "9lives"):
        assert topic_part(name) == name


def test_a_topic_longer_than_kafka_allows_is_refused() -> None:
    table = "t" * 63
    assert len(table_topic("p" * 120, "s" * 60, table)) == 245
    with pytest.raises(TopicNameTooLong, match="more than Kafka's 249"):
        table_topic("p" * 120, "s" * 63, "ü" * 21)  # 63 bytes, 126 characters encoded
