"""The Relation a snapshot synthesizes from the catalog (pure part; the integration tests
compare it with what pgoutput really sends)."""

from __future__ import annotations

from connector.pgoutput.messages import COLUMN_KEY, Relation, RelationColumn
from connector.replication.features import ServerFeatures
from connector.snapshot.tables import Leaf, SnapshotTable, build_relation

COLUMNS = [("id", 23, -1, True, False), ("name", 1043, 16, False, False),
           ("double", 23, -1, False, True), ("note", 25, -1, False, False)]


def test_key_flags_types_and_order_follow_the_catalog() -> None:
    relation = build_relation(10, "s", "t", "d", COLUMNS, None, ServerFeatures(150000))
    assert relation == Relation(None, 10, "s", "t", "d", (
        RelationColumn(COLUMN_KEY, "id", 23, -1), RelationColumn(0, "name", 1043, 16),
        RelationColumn(0, "note", 25, -1)))


def test_generated_columns_are_sent_only_from_postgresql_18_when_published() -> None:
    names = ["id", "name", "double", "note"]
    pg17, pg18 = ServerFeatures(170000), ServerFeatures(180000)
    assert [c.name for c in build_relation(1, "s", "t", "d", COLUMNS, names, pg17).columns] \
        == ["id", "name", "note"]
    assert [c.name for c in build_relation(1, "s", "t", "d", COLUMNS, names, pg18).columns] \
        == names
    assert [c.name for c in build_relation(1, "s", "t", "d", COLUMNS, ["id", "note"],
                                           pg18).columns] == ["id", "note"]


def test_estimated_rows_need_every_leaf_analyzed() -> None:
    relation = build_relation(1, "s", "t", "d", COLUMNS, None, ServerFeatures(150000))
    leaves = (Leaf(1, "s", "a", 10, 100.0), Leaf(2, "s", "b", 10, 50.4))
    assert SnapshotTable(relation, "p", None, leaves).estimated_rows == 150
    unknown = (Leaf(1, "s", "a", 10, 100.0), Leaf(2, "s", "b", 0, -1.0))
    assert SnapshotTable(relation, "p", None, unknown).estimated_rows is None
    assert SnapshotTable(relation, "r", None, leaves).name == "s.t"
