"""The catalog: built-ins, user types learned from Type messages and pg_type rows, fallbacks."""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import NamedTuple

import pytest

from connector.errors import DecodeError
from connector.pgtypes import CATALOG_QUERY, RowLoaders, TypeCatalog, Unknown, oids

MOOD, MOOD_ARRAY, POSINT, POSINT_ARRAY, PRICE, GOOD_MOOD, PAIR, CITEXT = (
    16400, 16399, 16410, 16409, 16420, 16430, 16440, 16450,
)  # fmt: skip


class Column(NamedTuple):
    """Shaped like the pgoutput decoder's RelationColumn: the OID is not the first field."""

    flags: int
    name: str
    type_oid: int
    type_modifier: int


def test_builtins_are_known() -> None:
    catalog = TypeCatalog()
    for oid in list(oids.NAMES) + list(oids.ELEMENT_OF):
        assert catalog.is_known(oid), oid
    assert catalog.text_loader(oids.INT4)("5") == 5
    assert catalog.binary_loader(oids.ARRAY_OF[oids.TEXT])(
        struct.pack(">iiIiii", 1, 0, 25, 1, 1, 1) + b"x"
    ) == ["x"]


def test_unknown_oid_is_kept_and_flagged() -> None:
    catalog = TypeCatalog()
    assert not catalog.is_known(99999)
    assert catalog.text_loader(99999)("(1,x)") == Unknown(99999, "(1,x)")
    value = catalog.binary_loader(99999)(b"\x00\x01")
    assert value == Unknown(99999, b"\x00\x01") and value.binary
    assert catalog.needs_lookup([99999, oids.INT4, 99999]) == [99999]


def test_enums_domains_and_their_arrays() -> None:
    catalog = TypeCatalog()
    catalog.register_enum(MOOD, "mood", array_oid=MOOD_ARRAY)
    catalog.register_domain(POSINT, oids.INT4, name="posint", array_oid=POSINT_ARRAY)
    catalog.register_domain(GOOD_MOOD, MOOD, name="good_mood")
    price_typmod = ((10 << 16) | 2) + 4
    catalog.register_domain(PRICE, oids.NUMERIC, name="price", base_typmod=price_typmod)
    assert catalog.text_loader(MOOD)("happy") == "happy"
    assert catalog.binary_loader(MOOD)("ünï".encode()) == "ünï"
    assert catalog.text_loader(MOOD_ARRAY)('{sad,"with,comma",NULL}') == ["sad", "with,comma", None]
    assert catalog.text_loader(POSINT)("7") == 7
    assert catalog.binary_loader(POSINT)(struct.pack(">i", 7)) == 7
    assert catalog.text_loader(POSINT_ARRAY)("{{1,2},{NULL,4}}") == [[1, 2], [None, 4]]
    assert catalog.text_loader(GOOD_MOOD)("ok") == "ok"
    assert catalog.text_loader(PRICE)("1.50") == Decimal("1.50")
    assert catalog.resolve(PRICE).typmod == price_typmod  # the domain's typmod, for Avro
    assert catalog.resolve(PRICE, 42).typmod == 42  # the column's wins
    resolved = catalog.resolve(POSINT_ARRAY)
    assert resolved.kind == "array" and resolved.element is not None
    assert resolved.element.kind == "builtin" and resolved.element.oid == oids.INT4
    assert catalog.needs_lookup([MOOD, MOOD_ARRAY, POSINT, GOOD_MOOD, PRICE]) == []


def test_type_messages_resolve_domains_over_known_types() -> None:
    """pgoutput's Type message names the *base* type of a domain, "" being pg_catalog."""
    catalog = TypeCatalog()
    catalog.register_type_message(POSINT, "", "int4")
    catalog.register_type_message(16500, "pg_catalog", "_text")  # a domain over text[]
    assert catalog.text_loader(POSINT)("12") == 12
    assert catalog.text_loader(16500)("{a,b}") == ["a", "b"]
    # an enum cannot be told from a composite by name alone: kept as Unknown until looked up
    catalog.register_type_message(MOOD, "public", "mood")
    assert catalog.text_loader(MOOD)("happy") == Unknown(MOOD, "happy")
    # a domain over it follows it
    catalog.register_type_message(GOOD_MOOD, "public", "mood")
    # every one is still looked up: a Type message tells neither a domain's type modifier
    # nor the domains in between
    assert catalog.needs_lookup([POSINT, MOOD, GOOD_MOOD]) == sorted([POSINT, MOOD, GOOD_MOOD])
    before = catalog.generation
    catalog.register_enum(MOOD, "mood")
    assert catalog.generation > before
    assert catalog.text_loader(MOOD)("happy") == "happy"
    assert catalog.text_loader(GOOD_MOOD)("happy") == "happy"
    # a later Type message does not undo what is known better
    catalog.register_type_message(MOOD, "public", "mood")
    assert catalog.text_loader(MOOD)("happy") == "happy"


def test_rows_of_the_catalog_query() -> None:
    assert "%s::oid[]" in CATALOG_QUERY
    rows = [
        # oid, nspname, typname, typtype, typbasetype, typtypmod, typelem, typarray, typlen,
        # typdelim, typcategory
        (MOOD, "public", "mood", "e", 0, -1, 0, MOOD_ARRAY, 4, ",", "E"),
        (MOOD_ARRAY, "public", "_mood", "b", 0, -1, MOOD, 0, -1, ",", "A"),
        (POSINT, "public", "posint", "d", 23, -1, 0, POSINT_ARRAY, 4, ",", "N"),
        (POSINT_ARRAY, "public", "_posint", "b", 0, -1, POSINT, 0, -1, ",", "A"),
        (23, "pg_catalog", "int4", "b", 0, -1, 0, 1007, 4, ",", "N"),
        (PAIR, "public", "pair", "c", 0, -1, 0, 0, -1, ",", "C"),
        (CITEXT, "public", "citext", "b", 0, -1, 0, 0, -1, ",", "S"),
        (16460, "public", "fixedlen", "b", 0, -1, 18, 0, 64, ",", "U"),  # typelem, not array
    ]
    catalog = TypeCatalog()
    catalog.add_rows(rows)
    assert catalog.text_loader(MOOD_ARRAY)("{a,NULL}") == ["a", None]
    assert catalog.binary_loader(POSINT_ARRAY)(
        struct.pack(">iiIiiii", 1, 0, POSINT, 1, 1, 4, 5)
    ) == [5]
    assert catalog.text_loader(PAIR)("(1,x)") == Unknown(PAIR, "(1,x)")
    assert catalog.text_loader(CITEXT)("Hello") == "Hello"
    assert catalog.binary_loader(CITEXT)(b"Hello") == "Hello"
    assert catalog.binary_loader(CITEXT)(b"\xff") == Unknown(CITEXT, b"\xff")
    assert catalog.text_loader(16460)("x") == Unknown(16460, "x")
    # known rows, even of types without a loader, need no new lookup
    assert catalog.needs_lookup([MOOD, MOOD_ARRAY, POSINT, PAIR, CITEXT, 16460]) == []
    assert not catalog.is_known(PAIR) and not catalog.is_known(16460)


def test_domain_cycles_are_an_error_not_a_hang() -> None:
    catalog = TypeCatalog()
    catalog.register_domain(20001, 20002)
    catalog.register_domain(20002, 20001)
    with pytest.raises(DecodeError, match="nested"):
        catalog.text_loader(20001)


def test_loaders_for_relation_columns() -> None:
    catalog = TypeCatalog()
    catalog.register_enum(MOOD, "mood")
    columns = [Column(1, "id", oids.INT8, -1), Column(0, "mood", MOOD, -1)]
    loaders = catalog.row_loaders(columns)
    assert isinstance(loaders, RowLoaders)
    assert [load(raw) for load, raw in zip(loaders.text, ["5", "ok"], strict=True)] == [5, "ok"]
    binary = [struct.pack(">q", 5), b"ok"]
    assert [load(raw) for load, raw in zip(loaders.binary, binary, strict=True)] == [5, "ok"]
    assert catalog.loaders_for(columns, binary=False) == loaders.text
    assert catalog.loaders_for([(oids.INT8, -1), MOOD], binary=True) == loaders.binary
    # loaders are shared, not rebuilt per call
    assert catalog.text_loader(oids.INT4) is catalog.text_loader(oids.INT4)


def test_money_scale() -> None:
    catalog = TypeCatalog(money_frac_digits=0)
    assert catalog.text_loader(oids.MONEY)("¥1,234") == Decimal(1234)
    assert catalog.binary_loader(oids.MONEY)(struct.pack(">q", 5)) == Decimal(5)


def test_a_domain_over_a_domain_takes_the_inner_domains_modifier() -> None:
    """pgoutput names the base type (numeric) of ``price`` over ``money82`` over numeric(8,2);
    the column's typmod is -1: only the looked-up rows give numeric(8,2), whichever came first."""
    money82, price = 16600, 16601
    typmod = (8 << 16 | 2) + 4
    rows = [(money82, "public", "money82", "d", oids.NUMERIC, typmod, 0, 0, -1, ",", "N", False),
            (price, "public", "price", "d", money82, -1, 0, 0, -1, ",", "N", False)]
    streamed = TypeCatalog()
    streamed.register_type_message(price, "pg_catalog", "numeric")
    assert streamed.needs_lookup([price]) == [price]
    streamed.add_rows(rows)
    assert streamed.needs_lookup([price]) == []
    looked_up = TypeCatalog()
    looked_up.add_rows(rows)
    looked_up.register_type_message(price, "pg_catalog", "numeric")  # changes nothing
    for catalog in (streamed, looked_up):
        assert catalog.resolve(price).typmod == typmod
        assert catalog.resolve(price).oid == oids.NUMERIC
