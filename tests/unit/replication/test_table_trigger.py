"""The pure part of the table_trigger event trigger (connector/replication/table_trigger.py):
the ``--tables`` globs it carries as regular expressions must match exactly the tables the
Python matcher (`connector.names.pattern_matches`, fnmatch) matches; the same cases run in
PostgreSQL in tests/integration/producer/test_producer_table_trigger.py."""

from __future__ import annotations

import re

import pytest

from connector.config import Config
from connector.control import ROWS_PREFIX
from connector.names import pattern_matches
from connector.pgoutput.messages import Insert, Message, Relation, RelationColumn, Type
from connector.replication.table_trigger import (
    TriggerSettings,
    created_rows,
    drop_names,
    glob_regex,
    install_sql,
    names,
    pattern_regexes,
    remove_sql,
)

#: Globs and names crossing every rule: runs, single characters, sets, complements, ranges,
#: an empty range, an unclosed bracket, regex metacharacters, dots, non-ASCII, newlines.
GLOBS = ["*", "orders", "order?", "w?_*", "[abc]*", "[!abc]*", "[a-c]x", "[z-a]", "[!z-a]",
         "[]]x", "[!]]x", "[", "a[", "a[b", "x+y", "a.b", "(a)|b", "^$", "a\\b", "a{2}", "*_log",
         "[%_]*", "t-[0-9]", "é*", "[a-]", "[-a]", "*[!0-9]"]
NAMES = ["orders", "orders2", "order1", "w0_nk1", "w01", "apple", "cat", "zed", "bx", "dx",
         "]x", "ax", "[", "a[", "a[b", "ab", "x+y", "xxy", "a.b", "axb", "(a)|b", "a", "b",
         "^$", "a\\b", "aa", "a{2}", "t_log", "_x", "%y", "t-5", "t-x", "été", "-", "a", "x9",
         "x\n", "\n", "", "a\nb", "9"]


@pytest.mark.parametrize("glob", GLOBS)
def test_glob_regex_agrees_with_fnmatch(glob: str) -> None:
    import fnmatch

    regex = re.compile(glob_regex(glob), re.DOTALL)  # PostgreSQL's `.` matches a newline too
    for name in NAMES:
        assert bool(regex.search(name)) == fnmatch.fnmatchcase(name, glob), (glob, name)


def test_patterns_split_as_the_python_matcher_does() -> None:
    tables = [("public", "orders"), ("sales", "orders"), ("s.x", "t"), ("pub", "lic"),
              ("public", "a.b")]
    for pattern in ["orders", "*.orders", "s?les.*", "s.x.t", "*.*", "public.a.b", "pub*"]:
        (schema_re, table_re), = pattern_regexes([pattern])
        for schema, table in tables:
            ours = bool(re.search(schema_re, schema, re.DOTALL)) and \
                bool(re.search(table_re, table, re.DOTALL))
            assert ours == pattern_matches(pattern, schema, table), (pattern, schema, table)


def test_each_publication_has_its_own_trigger_and_settings_in_the_comment() -> None:
    cfg = Config(tables=["public.w*", "sales.*"], publication="pub a", keyless_tables="full",
                 table_settings={"public.w_secret": {"columns": ["id"]},
                                 "public.w_*": {"mask": {"v": "null"}}})
    settings = cfg.table_trigger_settings()
    assert settings.patterns == ["public.w*", "sales.*"]
    # first match decides: a column list is the watcher's to apply, a null mask is not
    assert settings.settings == [("public.w_secret", True), ("public.w_*", False)]
    function, trigger = names("pub a")
    assert names("pub b") != (function, trigger) and len(trigger) < 63
    sql = install_sql(settings)
    assert f"CREATE EVENT TRIGGER {trigger} ON ddl_command_end" in sql
    assert settings.comment().startswith("pgcdc table_trigger 3 ") and \
        '"keyless": "full"' in settings.comment()
    drop_function, drop_trigger = drop_names("pub a")
    assert f"CREATE EVENT TRIGGER {drop_trigger} ON sql_drop" in sql
    assert remove_sql("pub a") == (f"DROP EVENT TRIGGER IF EXISTS {trigger}; "
                                   f"DROP FUNCTION IF EXISTS {function}; "
                                   f"DROP EVENT TRIGGER IF EXISTS {drop_trigger}; "
                                   f"DROP FUNCTION IF EXISTS {drop_function};")
    # `*` is the list of every table; with --all-tables-publication no pattern at all
    assert Config().table_trigger_settings().patterns == ["*.*"]
    assert Config(all_tables_publication=True, keyless_tables="full"
                  ).table_trigger_settings().patterns is None
    assert TriggerSettings("p", None, "full").comment() != TriggerSettings(
        "p", ["*.*"], "full").comment()


def test_status_says_how_new_tables_join() -> None:
    from connector.tools.status import table_trigger_line

    on = Config(table_trigger=True)
    ours = on.table_trigger_settings().comment()
    assert table_trigger_line(on, ours) == "table_trigger: on, event trigger installed"
    assert table_trigger_line(on, None) == "table_trigger: on, event trigger not installed"
    assert "other settings" in table_trigger_line(Config(table_trigger=True, tables=["a.*"]),
                                                  ours)
    off = Config()
    assert table_trigger_line(off, None).startswith("table_trigger: off: a new table joins "
                                                    "within ~2 s")
    assert "DROP EVENT TRIGGER" in table_trigger_line(off, ours)


#: A ``pgcdc.rows`` message's content as the trigger wrote it (captured from PostgreSQL 18 with
#: test_decoding: ``CREATE TABLE f_ctas AS SELECT ...`` in a session with TimeZone
#: Asia/Kolkata and DateStyle 'SQL, DMY'; REPLICA IDENTITY FULL set by the trigger).
ROWS_CONTENT = (
    b'{"publication" : "pub_x", "relation_id" : 16401, "schema" : "public", "table" : "f_ctas", '
    b'"replica_identity" : "f", "types" : [[16397, "public", "f_mood"]], "columns" : [["id", 23, '
    b'-1, true], ["n", 1700, -1, true], ["ts", 1184, -1, true], ["tags", 1009, -1, true], '
    b'["note", 25, -1, true], ["mood", 16397, -1, true]], "rows" : [["1","1.50",'
    b'"2026-01-02 03:04:05.123456+00","{a,\\"b c\\",NULL}","","happy"],'
    b'["2",null,null,null,null,null]]}')


def test_a_rows_message_stands_for_the_types_relation_and_inserts_pgoutput_would_send() -> None:
    msg = Message(None, 1, 0x1000, ROWS_PREFIX, ROWS_CONTENT)
    out = created_rows(msg, "pub_x")
    types = [m for m in out if isinstance(m, Type)]
    relation, *inserts = [m for m in out if not isinstance(m, Type)]
    assert out[:len(types)] == types  # Types first, then the Relation, then the rows
    assert isinstance(relation, Relation)
    assert relation == Relation(None, relation.relation_id, "public", "f_ctas", "f", (
        RelationColumn(1, "id", 23, -1), RelationColumn(1, "n", 1700, -1),
        RelationColumn(1, "ts", 1184, -1), RelationColumn(1, "tags", 1009, -1),
        RelationColumn(1, "note", 25, -1), RelationColumn(1, "mood", types[0].type_oid, -1)))
    assert types == [Type(None, types[0].type_oid, "public", "f_mood")]
    assert all(isinstance(i, Insert) and i.relation_id == relation.relation_id and i.xid is None
               for i in inserts)
    # the output text under the pinned settings; NULL and the empty string stay apart
    assert [i.new for i in inserts] == [  # type: ignore[attr-defined]
        ("1", "1.50", "2026-01-02 03:04:05.123456+00", '{a,"b c",NULL}', "", "happy"),
        ("2", None, None, None, None, None)]
    # in a stream block every message carries the (top-level) xid of the message
    streamed = created_rows(msg._replace(xid=77), "pub_x")
    assert {m.xid for m in streamed} == {77}  # type: ignore[union-attr]
    # another publication's producer ignores it
    assert created_rows(msg, "pub_other") == []
    # CREATE TABLE AS SELECT FROM generate_series(1, 2): rows without columns (captured too)
    zero = (b'{"publication" : "pub_x", "relation_id" : 16407, "schema" : "public", "table" : '
            b'"f_zero", "replica_identity" : "f", "types" : [], "columns" : [], '
            b'"rows" : [[],[]]}')
    assert created_rows(msg._replace(content=zero), "pub_x") == [
        Relation(None, 16407, "public", "f_zero", "f", ()), Insert(None, 16407, ()),
        Insert(None, 16407, ())]


@pytest.mark.parametrize("content", [
    b"not json", b"[]", b'{"publication": "p"}',
    b'{"publication": "p", "relation_id": 1, "schema": "s", "table": "t", '
    b'"replica_identity": "f", "types": [], "columns": [["a", 23, -1, true]], '
    b'"rows": [["1", "2"]]}',
    b'{"publication": "p", "relation_id": 1, "schema": "s", "table": "t", '
    b'"replica_identity": "f", "types": [], "columns": [["a", 23, -1, true]], '
    b'"rows": [[1]]}',
])
def test_an_unreadable_rows_message_is_an_error_naming_it(content: bytes) -> None:
    with pytest.raises(ValueError, match="not a pgcdc.rows message"):
        created_rows(Message(None, 1, 0x1000, ROWS_PREFIX, content), "p")
