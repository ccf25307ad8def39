"""Partitioned tables (connector/replication/partitions.py): the publish_via_partition_root a
publication gets, and which partitions were attached or detached between two looks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.config import load
from connector.errors import ConfigError
from connector.replication.partitions import VIA_ROOT_DEFAULT, leaf_changes, via_root_change
from connector.tools.status import detach_line, via_root_line


def test_a_new_publication_gets_the_option_or_the_root_by_default() -> None:
    assert VIA_ROOT_DEFAULT is True
    assert via_root_change(None, None) is True
    assert via_root_change(False, None) is False
    assert via_root_change(True, None) is True


def test_an_existing_publication_changes_only_when_the_option_is_set_and_differs() -> None:
    # Unset: its consumers' topics never change under them.
    assert via_root_change(None, False) is None
    assert via_root_change(None, True) is None
    assert via_root_change(True, True) is None
    assert via_root_change(False, False) is None
    assert via_root_change(True, False) is True
    assert via_root_change(False, True) is False


R, S = ("public", "m"), ("public", "n")
A, B, C = ("public", "m_1"), ("public", "m_2"), ("public", "m_3")


def test_attached_and_detached_leaves_of_known_roots() -> None:
    before = {R: frozenset({A, B}), S: frozenset()}
    after = {R: frozenset({B, C}), S: frozenset({("x", "n_1")})}
    assert leaf_changes(before, after) == ([(R, C), (S, ("x", "n_1"))], [(R, A)])


def test_a_root_new_or_gone_is_no_partition_change() -> None:
    # A new root is the table watcher's new table (its snapshot reads every leaf).
    assert leaf_changes({}, {R: frozenset({A})}) == ([], [])
    assert leaf_changes({R: frozenset({A})}, {}) == ([], [])


leaves = st.frozensets(st.tuples(st.sampled_from("ab"), st.sampled_from("uvwxyz")))
layouts = st.dictionaries(st.sampled_from([R, S]), leaves)


@given(layouts, layouts)
def test_applying_the_changes_to_before_gives_after(before, after) -> None:
    attached, detached = leaf_changes(before, after)
    for root in set(before) & set(after):
        now = (before[root] - {leaf for r, leaf in detached if r == root}) | \
            {leaf for r, leaf in attached if r == root}
        assert now == after[root]
    assert all(root in before and root in after for root, _ in attached + detached)


def test_config_refuses_the_option_on_a_publication_it_does_not_manage() -> None:
    base = {"dsn": "host=x", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r"}
    assert load(None, base, environ={}).publish_via_partition_root is None
    assert load(None, {**base, "publish_via_partition_root": False},
                environ={}).publish_via_partition_root is False
    with pytest.raises(ConfigError, match="publish_via_partition_root is set in the publication"):
        load(None, {**base, "publish_via_partition_root": True, "create_publication": False},
             environ={})
    with pytest.raises(ConfigError, match="publish_via_partition_root: expected true or false"):
        load(None, {**base, "publish_via_partition_root": "yes"}, environ={})


def test_status_says_how_partitions_are_published() -> None:
    assert via_root_line(True) == \
        "partitions published through their root (publish_via_partition_root = true)"
    assert via_root_line(False) == \
        "partitions published leaf by leaf (publish_via_partition_root = false)"
    assert detach_line(True, True) == "detach_deletes: on, event triggers installed"
    assert detach_line(False, False) == ("detach_deletes: off (event triggers not installed): a "
                                         "DETACHed partition's rows stay in the root's topic")


def test_the_flag_and_the_file_set_it_and_unset_leaves_it_to_the_publication(tmp_path) -> None:
    from connector.cli import build_parser
    from connector.tools.run import config_from_args

    flags = ["run", "--dsn", "host=db", "--bootstrap-servers", "k:9092",
             "--schema-registry-url", "http://r"]
    assert config_from_args(build_parser().parse_args(flags)).publish_via_partition_root is None
    for flag, value in [("--publish-via-partition-root", True),
                        ("--no-publish-via-partition-root", False)]:
        args = build_parser().parse_args([*flags, flag])
        assert config_from_args(args).publish_via_partition_root is value
    config = tmp_path / "pgcdc.yaml"
    config.write_text("publish_via_partition_root: false\n")
    args = build_parser().parse_args([*flags, "--config", str(config)])
    assert config_from_args(args).publish_via_partition_root is False


def test_detach_deletes_is_off_by_default_and_needs_the_root(tmp_path) -> None:
    from connector.cli import build_parser
    from connector.tools.run import config_from_args

    base = {"dsn": "host=x", "bootstrap_servers": "k:9092", "schema_registry_url": "http://r"}
    assert load(None, base, environ={}).detach_deletes is False
    assert load(None, {**base, "detach_deletes": True}, environ={}).detach_deletes is True
    with pytest.raises(ConfigError, match="detach_deletes .* needs publish_via_partition_root"):
        load(None, {**base, "detach_deletes": True, "publish_via_partition_root": False},
             environ={})
    flags = ["run", "--dsn", "host=db", "--bootstrap-servers", "k:9092",
             "--schema-registry-url", "http://r"]
    assert config_from_args(build_parser().parse_args([*flags, "--detach-deletes"])) \
        .detach_deletes is True
    config = tmp_path / "pgcdc.yaml"
    config.write_text("detach_deletes: true\n")
    args = build_parser().parse_args([*flags, "--config", str(config), "--no-detach-deletes"])
    assert config_from_args(args).detach_deletes is False


def test_grants_prints_the_trigger_sql_for_a_dba(capsys) -> None:
    from connector.cli import build_parser
    from connector.replication.detach_trigger import remove_sql

    args = build_parser().parse_args(["grants", "--detach-deletes-sql"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"-- detach_deletes (docs/publishing.md); to remove: {remove_sql()}")
    assert "CREATE EVENT TRIGGER pgcdc_detach_end ON ddl_command_end" in out
    assert "pg_logical_emit_message(true, 'pgcdc.detach', content)" in out
    with pytest.raises(ConfigError, match="needs --role and --tables"):
        args = build_parser().parse_args(["grants", "--role", "pgcdc"])
        args.handler(args)
