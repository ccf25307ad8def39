"""The pure part of the table_trigger event trigger (connector/replication/table_trigger.py):
the ``--tables`` globs it carries as regular expressions must match exactly the tables the
Python matcher (`connector.names.pattern_matches`, fnmatch) matches; the same cases run in
PostgreSQL in tests/integration/producer/test_producer_table_trigger.py."""

from __future__ import annotations

import re

import pytest

from connector.config import Config
from connector.names import pattern_matches
from connector.replication.table_trigger import (
    TriggerSettings,
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
    assert settings.comment().startswith("pgcdc table_trigger 2 ") and \
        '"keyless": "full"' in settings.comment()
    assert remove_sql("pub a") == (f"DROP EVENT TRIGGER IF EXISTS {trigger}; "
                                   f"DROP FUNCTION IF EXISTS {function};")
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
