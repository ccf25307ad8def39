"""Avro names: valid, reversible, injective; topic names per the contract."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from connector.avro.names import (
    from_avro_name,
    is_avro_name,
    namespace_of,
    table_topic,
    to_avro_name,
    topic_part,
)

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


@pytest.mark.parametrize(("schema", "table", "topic"), [
    ("public", "orders", "shop.public.orders"),
    ("my schema", "order.items", "shop.my_schema.order_items"),
    ("s-1", "Größe", "shop.s-1.Gr__e"),
    ("_x", "a$b", "shop._x.a_b"),
])
def test_table_topic(schema: str, table: str, topic: str) -> None:
    assert table_topic("shop", schema, table) == topic


@given(pg_names, pg_names)
def test_table_topic_has_exactly_two_dots_after_prefix(schema: str, table: str) -> None:
    topic = table_topic("pre.fix", schema, table)
    assert re.fullmatch(r"pre\.fix\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", topic)
    assert topic_part(schema) == re.sub(r"[^A-Za-z0-9_-]", "_", schema)
