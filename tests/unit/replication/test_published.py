"""What a publication pgcdc creates publishes of each table (connector/replication/published.py):
the settings' shape, the table list entries, the columns a filter uses, and the refusals
PostgreSQL would otherwise make later, at the application's UPDATE or DELETE."""

from __future__ import annotations

import pytest
from psycopg import sql

from connector.config import load
from connector.errors import ConfigError
from connector.replication.published import (
    TableSetting,
    filter_columns,
    normalized_filter,
    parse_table_settings,
    refusals,
    sets_publication_lists,
    setting_for,
    table_entry,
    user_publication_refusals,
)


def _text(composed: sql.Composed) -> str:
    """The statement text without a connection."""
    return composed.as_string(None)


def test_settings_parse_in_file_order_and_malformed_ones_are_one_line() -> None:
    parsed = parse_table_settings({"public.orders": {"columns": ["id", "total"],
                                                     "where": " region = 'eu' "},
                                   "audit.*": {"where": "id > 0"}, "t": None})
    assert parsed == [TableSetting("public.orders", ("id", "total"), "region = 'eu'"),
                      TableSetting("audit.*", None, "id > 0"), TableSetting("t")]
    for bad, says in [({"t": ["id"]}, "expected a mapping"),
                      ({"t": {"colums": ["id"]}}, r"unknown key\(s\) colums"),
                      ({"t": {"columns": []}}, "non-empty list"),
                      ({"t": {"columns": "id"}}, "non-empty list"),
                      ({"t": {"columns": ["id", "id"]}}, "twice"),
                      ({"t": {"where": ""}}, "boolean expression"),
                      ({"t": {"where": "true; DROP TABLE t"}}, "no ';'")]:
        with pytest.raises(ConfigError, match=says):
            parse_table_settings(bad)
    # A ';' inside a literal is a value, not a second statement.
    assert parse_table_settings({"t": {"where": "v <> ';'"}})[0].where == "v <> ';'"


def test_first_matching_pattern_wins_and_no_schema_means_public() -> None:
    settings = parse_table_settings({"orders": {"where": "id > 1"}, "*.*": {"where": "true"}})
    assert setting_for(settings, "public", "orders") is settings[0]
    assert setting_for(settings, "sales", "orders") is settings[1]
    assert setting_for(settings[:1], "sales", "orders") is None


def test_table_entry_is_the_table_its_columns_and_its_filter() -> None:
    setting = TableSetting("x", ("id", "Total"), "region = 'eu'")
    assert _text(table_entry("public", "orders", setting)) == \
        '"public"."orders" ("id", "Total") WHERE (region = \'eu\')'
    assert _text(table_entry("public", "orders", None)) == '"public"."orders"'
    assert _text(table_entry("s", "t", TableSetting("x", where="id > 1"))) == \
        '"s"."t" WHERE (id > 1)'


def test_filter_columns_skip_literals_functions_typed_literals_and_comments() -> None:
    cols = ["id", "Region", "date", "ts", "name", "status", "lower"]
    assert filter_columns('"Region" = $$id$$ AND date \'2026-01-01\' < ts AND lower(name) = '
                          "'status' -- status", cols) == ["Region", "ts", "name"]
    assert filter_columns("ID > 5 AND pg_catalog.lower(name) <> 'x'", cols) == ["id", "name"]
    assert filter_columns("region = 'eu'", cols) == []  # "Region" is case-sensitive


def test_refusals_are_what_postgresql_would_refuse() -> None:
    cols, key = ["id", "region", "total", "g"], ["id"]

    def refused(setting: TableSetting, *, ud: bool = True, gen_ok: bool = False,
                identity: list[str] = key) -> list[str]:
        return refusals("public", "orders", setting, cols, identity, ["g"],
                        publishes_update_or_delete=ud, generated_allowed=gen_ok)

    assert refused(TableSetting("o", ("id", "total"), "id > 10")) == []
    [line] = refused(TableSetting("o", ("region", "total")))
    assert "must hold its replica identity (key) column(s) id" in line
    [line] = refused(TableSetting("o", ("id", "nope")))
    assert "has no column(s) nope" in line
    [line] = refused(TableSetting("o", where="region = 'eu'"))
    assert "filter of public.orders uses region, outside its replica identity (id)" in line
    # An insert-only publication may filter on any column; REPLICA IDENTITY FULL: any column.
    assert refused(TableSetting("o", where="region = 'eu'"), ud=False) == []
    assert refused(TableSetting("o", where="region = 'eu'"), identity=cols) == []
    # FULL also means a column list must name every column.
    assert "column(s) region, g" in refused(TableSetting("o", ("id", "total")), identity=cols)[0]
    # Generated columns in a column list: PostgreSQL 18 only.
    assert "only by PostgreSQL 18+" in refused(TableSetting("o", ("id", "g")))[0]
    assert refused(TableSetting("o", ("id", "g")), gen_ok=True) == []


def test_a_filter_reads_alike_as_configured_and_as_postgresql_deparses_it() -> None:
    assert normalized_filter("id > 5 AND r = 'eu'") == normalized_filter(
        "((id > 5) AND (r = ('eu'::character varying)::text))")
    assert normalized_filter("ts > '2026-01-01'::timestamp with time zone") == \
        normalized_filter("(ts > '2026-01-01'::timestamp with time zone)")
    assert normalized_filter("r = 'EU'") != normalized_filter("r = 'eu'")
    assert normalized_filter(None) is None


def test_config_refuses_table_settings_it_cannot_set() -> None:
    base = {"dsn": "host=x", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r"}
    cfg = load(None, {**base, "table_settings": {"t": {"where": "id > 1"}}}, environ={})
    assert cfg.published_settings() == [TableSetting("t", None, "id > 1")]
    for extra, says in [({"create_publication": False}, "create_publication false .* drop "
                                                         r"them \(masks are allowed\)"),
                        ({"all_tables_publication": True}, "FOR ALL TABLES"),
                        ({"table_settings": {"t": {"where": 1}}}, "boolean expression")]:
        with pytest.raises(ConfigError, match=says):
            load(None, {**base, "table_settings": {"t": {"where": "id > 1"}}, **extra},
                 environ={})
    with pytest.raises(ConfigError, match="publish_generated_columns is set in the publication"):
        load(None, {**base, "publish_generated_columns": True, "create_publication": False},
             environ={})
    with pytest.raises(ConfigError, match="table_settings: expected a mapping"):
        load(None, {**base, "table_settings": ["t"]}, environ={})


def test_status_line_says_which_columns_and_rows_are_published() -> None:
    from connector.tools.status import published_line

    assert published_line(["id", "a"], 2, None) == "published: all 2 columns; rows: all"
    assert published_line(["id", "a"], 4, "(id > 10)") == \
        "published: columns id, a (2 of 4); rows: WHERE (id > 10)"


def test_masks_alone_may_go_with_a_users_publication() -> None:
    """create_publication false: a column list or filter would not be applied (refused above);
    masks are the producer's, so they load (a hash still needs its salt)."""
    base = {"dsn": "host=x", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r",
            "create_publication": False, "mask_salt": "s"}
    masks = {"t": {"mask": {"email": "hash", "phone": None, "ssn": "exclude"}}}
    cfg = load(None, {**base, "table_settings": masks}, environ={})
    assert not sets_publication_lists(cfg.published_settings())
    assert set(cfg.masking().for_table("public", "t")) == {"email", "phone"}
    assert cfg.masking().excluded_for("public", "t") == ("ssn",)
    with pytest.raises(ConfigError, match="a hash mask needs mask_salt"):
        load(None, {**base, "mask_salt": "", "table_settings": masks}, environ={})


def test_masks_on_a_users_publication_hold_only_on_what_it_sends() -> None:
    [setting] = parse_table_settings({"public.people": {"mask": {
        "email": "hash", "name": {"truncate": 2}, "ssn": "exclude"}}})
    columns, identity = ["ref", "email", "name", "ssn", "note"], ["ref"]

    def check(published: list[str] | None, where: str | None = None, *, listed: bool = True,
              of: TableSetting = setting) -> list[str]:
        return user_publication_refusals("Pub", "public", "people", of, columns, identity,
                                         published, where, listed=listed)

    # ssn left out by the user's column list: null/hash/truncate apply to what is sent
    assert check(["ref", "email", "name", "note"]) == []
    # ssn published (no column list, or one naming it): one line naming the statements
    [line] = check(None, "(ref > 'a')")
    assert "\n" not in line
    assert line == (
        "table_settings 'public.people': mask excludes column(s) ssn of public.people, which "
        "publication Pub publishes (with create_publication false pgcdc does not change it): "
        "remove them from its column list in one transaction: BEGIN; ALTER PUBLICATION \"Pub\" "
        "DROP TABLE \"public\".\"people\"; ALTER PUBLICATION \"Pub\" ADD TABLE "
        "\"public\".\"people\" (\"ref\", \"email\", \"name\", \"note\") WHERE ((ref > 'a')); "
        "COMMIT, or mask them with null instead")
    # published by FOR ALL TABLES / TABLES IN SCHEMA: no DROP TABLE to run
    [line] = check(columns, listed=False)
    assert "publish public.people from a table list with a column list without them" in line
    # a hash of a column the user's list leaves out would fail when the schema is derived
    [line] = check(["ref", "name", "note"])
    assert line.endswith("mask names column(s) email of public.people that publication Pub "
                         "does not publish: drop them from mask")
    [key, unknown] = parse_table_settings({"people": {"mask": {"ref": "exclude"}},
                                           "public.*": {"mask": {"nope": None}}})
    [line] = check(["ref", "note"], of=key)  # the key is always sent: never excludable
    assert "cannot exclude replica identity (key) column(s) ref of public.people" in line
    assert "mask names column(s) nope that public.people does not have" in \
        check(None, of=unknown)[0]
