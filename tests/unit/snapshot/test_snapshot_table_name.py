"""`TableName`: tables are told apart by (schema, table), never by the text they print as."""

from __future__ import annotations

from connector.names import TableName


def test_names_with_dots_print_alike_and_stay_distinct() -> None:
    a, b = TableName("a.b", "c"), TableName("a", "b.c")
    assert str(a) == str(b) == "a.b.c"
    assert a != b and len({a, b}) == 2


def test_readings_are_every_split_at_a_dot() -> None:
    assert TableName.readings("public.orders") == [TableName("public", "orders")]
    assert TableName.readings("a.b.c") == [TableName("a", "b.c"), TableName("a.b", "c")]
    assert TableName.readings("nodot") == []
