"""`keyless_refused` (connector/replication/keyless.py): under ``--keyless-tables refuse`` the same
command always starts again. What a running producer tolerates (a keyless table created
later, left out of the list) its next start tolerates too; only the first start (no
publication yet) refuses every keyless table, and later starts refuse only the tables named
exactly in --tables (issue 46)."""

from __future__ import annotations

import pytest

from connector.replication.keyless import exact_tables, keyless_left_out, keyless_refused

A, B, C = ("public", "a"), ("public", "b"), ("app", "c")


@pytest.mark.parametrize(("patterns", "exact"), [
    (["*"], set()),
    (["*.*", "public.*", "app.c?", "app.[cd]"], set()),
    (["a", "public.b", "app.c"], {A, B, C}),  # no schema: public
    (["a", "public.*"], {A}),
    (["my.schema.t"], {("my.schema", "t")}),  # the schema is all before the last dot
])
def test_exact_names_have_no_wildcard(patterns: list[str], exact: set[tuple[str, str]]) -> None:
    assert exact_tables(patterns) == exact


def test_the_first_start_refuses_every_keyless_table() -> None:
    assert keyless_refused([A, C], ["*"], first_start=True) == ([A, C], [])
    assert keyless_refused([A, C], ["a", "app.*"], first_start=True) == ([A, C], [])


def test_a_later_start_leaves_out_what_a_pattern_matched() -> None:
    # `*` (the default list): a keyless table created while pgcdc ran is left out again.
    assert keyless_refused([A, C], ["*"], first_start=False) == ([], [A, C])
    # Named exactly by the user: refused at every start; matched by a pattern: left out.
    assert keyless_refused([A, C], ["a", "app.*"], first_start=False) == ([A], [C])
    assert keyless_refused([], ["a"], first_start=False) == ([], [])


def test_the_start_warns_as_the_running_producer_does() -> None:
    line = keyless_left_out("public.a", "pgcdc")
    assert line.startswith("public.a matches --tables but has no primary key: left out of "
                           "publication pgcdc")
    assert "--keyless-tables full" in line
