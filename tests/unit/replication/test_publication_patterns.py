"""`managed_patterns` (connector/replication/admin.py): what `--tables` makes of the
publication. `*` is a table list pgcdc keeps like any pattern's (issue 33: FOR ALL TABLES
would publish a new keyless table at once and break the application's UPDATE/DELETE on it);
FOR ALL TABLES only with the explicit setting."""

from __future__ import annotations

import pytest

from connector.replication.admin import list_changes, managed_patterns


@pytest.mark.parametrize(("patterns", "all_tables", "expected"), [
    (["*"], False, ["*.*"]),  # the default: every table of every schema, as a list
    (["*"], True, None),  # --all-tables-publication: FOR ALL TABLES
    (["public.*"], False, ["public.*"]),
    (["public.*"], True, ["public.*"]),  # patterns are always a list (config refuses this)
    (["a", "b.*"], False, ["a", "b.*"]),
    (["*", "x"], False, ["*", "x"]),  # `*` among others is a pattern (public.*)
])
def test_star_is_a_list_unless_all_tables_is_asked_for(patterns: list[str], all_tables: bool,
                                                      expected: list[str] | None) -> None:
    assert managed_patterns(patterns, all_tables=all_tables) == expected


def test_list_changes_leave_published_partitions_alone() -> None:
    """`list_changes`: what a restart changes in a list. A partition published through its
    listed parent is not new; a table the list names but no pattern wants any more is gone."""
    current = [("public", "a"), ("public", "parent"), ("public", "renamed_away")]
    published = [("public", "a"), ("public", "part_1")]  # pg_publication_tables: leaves
    wanted = [("public", "a"), ("public", "b"), ("public", "parent"), ("public", "part_1")]
    assert list_changes(current, published, wanted) == (
        [("public", "renamed_away")], [("public", "b")])
    assert list_changes(wanted, published, wanted) == ([], [])
