"""The re-sync decision: which DDL changed existing rows' published values."""

from __future__ import annotations

from pathlib import Path

from connector.snapshot.incremental.rewrites import (
    Column,
    Settle,
    published_reasons,
    reasons,
    signature,
)

INT4, INT8, TEXT, VARCHAR = 23, 20, 25, 1043
ID = Column(1, "id", INT4, -1)
N = Column(2, "n", INT4, -1)


def test_unchanged_and_harmless_changes_need_no_resync() -> None:
    assert reasons([ID, N], [ID, N]) == []
    # A column added without a default: existing rows are NULL in PostgreSQL and the lake.
    assert reasons([ID, N], [ID, N, Column(3, "c", TEXT, -1)]) == []
    # A column dropped: the remaining values are unchanged.
    assert reasons([ID, N], [ID]) == []
    # A generated column added: not published.
    assert reasons([ID], [ID, Column(3, "g", INT4, -1, generated=True,
                                     fills_existing=True)]) == []
    # An enum value added: no row holds it yet.
    e1 = Column(3, "e", 99999, -1, enum_labels=((1, "a"),))
    e2 = e1._replace(enum_labels=((1, "a"), (2, "b")))
    assert reasons([ID, e1], [ID, e2]) == []


def test_type_change() -> None:
    found = reasons([ID, N], [ID, N._replace(type_oid=INT8, type_text="bigint")])
    assert found == ["column n changed type from type 23 to bigint"]
    # typmod alone: varchar(10) -> varchar(5) truncates nothing, but numeric(10,2) -> (10,0)
    # rounds: every typmod change counts.
    v10 = Column(2, "v", VARCHAR, 14, type_text="character varying(10)")
    v20 = v10._replace(typmod=24, type_text="character varying(20)")
    assert reasons([ID, v10], [ID, v20]) == [
        "column v changed type from character varying(10) to character varying(20)"]


def test_added_column_with_values_for_existing_rows() -> None:
    c = Column(3, "c", TEXT, -1, fills_existing=True)
    assert reasons([ID, N], [ID, N, c]) == ["column c added with a value for existing rows"]


def test_drop_expression_rename_and_enum_rename() -> None:
    g = Column(2, "g", INT4, -1, generated=True)
    assert reasons([ID, g], [ID, g._replace(generated=False)]) == [
        "column g is no longer generated (DROP EXPRESSION) or is newly published (a column "
        "list naming it)"]
    assert reasons([ID, N], [ID, N._replace(name="m")]) == ["column n renamed to m"]
    e1 = Column(3, "e", 99999, -1, enum_labels=((1, "a"), (2, "b")))
    e2 = e1._replace(enum_labels=((1, "a"), (2, "bee")))
    assert reasons([ID, e1], [ID, e2]) == ["column e: enum value renamed 'b' to 'bee'"]


def test_relation_columns_match_by_name() -> None:
    """A Relation message has no attnum: columns are matched by name."""
    old = [Column(0, "id", INT4, -1), Column(0, "n", INT4, -1)]
    new = [Column(0, "id", INT4, -1), Column(0, "n", INT8, -1)]
    assert reasons(old, new) == ["column n changed type from type 23 to type 20"]


def test_settle_coalesces_a_burst_into_one_resync() -> None:
    settle = Settle()
    assert settle.observe(7, [ID, N]) is None  # first sight: the baseline
    assert settle.observe(7, [ID, N]) is None
    c = Column(3, "c", TEXT, -1, fills_existing=True)
    assert settle.observe(7, [ID, N, c]) is None  # changed: wait for it to hold still
    n8 = N._replace(type_oid=INT8)
    assert settle.observe(7, [ID, n8, c]) is None  # still changing
    found = settle.observe(7, [ID, n8, c])
    assert found == ["column c added with a value for existing rows",
                     "column n changed type from type 23 to type 20"]
    assert settle.observe(7, [ID, n8, c]) is None  # once


def test_settle_ignores_harmless_changes_and_forgets_tables() -> None:
    settle = Settle()
    settle.observe(1, [ID])
    settle.observe(1, [ID, Column(2, "x", TEXT, -1)])
    assert settle.observe(1, [ID, Column(2, "x", TEXT, -1)]) is None
    settle.observe(2, [ID])
    settle.forget([1])
    assert 2 not in settle.seen
    assert settle.observe(2, [ID, N._replace(type_oid=INT8)]) is None  # a baseline again


def test_signature_is_what_a_relation_shows() -> None:
    g = Column(3, "g", INT4, -1, generated=True)
    assert signature([ID, N, g]) == (("id", INT4, -1), ("n", INT4, -1))


def test_the_decision_is_pure() -> None:
    from tests.unit.test_layering import IO_MODULES, imported_modules

    path = (Path(__file__).resolve().parents[3] / "connector" / "snapshot" / "incremental"
            / "rewrites.py")
    assert [m for m in imported_modules(path)
            if any(m == b or m.startswith(b + ".") for b in IO_MODULES)] == []


# ------------------------------------------------------- published columns against the catalog

def _pub(*columns: Column) -> list[Column]:
    """Columns as a Relation shows them: no attnum, no flags, published ones only."""
    return [Column(0, c.name, c.type_oid, c.typmod) for c in columns if not c.generated]


def test_published_equal_to_the_catalog_needs_nothing() -> None:
    g = Column(3, "g", INT4, -1, generated=True)  # not published: the Relation lacks it
    assert published_reasons(_pub(ID, N), [ID, N, g]) == []
    # A column added without a value for existing rows; one dropped: nothing changed.
    assert published_reasons(_pub(ID, N), [ID, N, Column(3, "c", TEXT, -1)]) == []
    assert published_reasons(_pub(ID, N), [ID]) == []
    assert published_reasons(_pub(ID, N), [N._replace(attnum=2)]) == []


def test_published_differs_by_a_rewrite() -> None:
    c = Column(3, "c", TEXT, -1, fills_existing=True)
    assert published_reasons(_pub(ID, N), [ID, N, c]) == [
        "column c added with a value for existing rows"]
    assert published_reasons(_pub(ID, N), [ID, N._replace(type_oid=INT8, type_text="bigint")]
                             ) == ["column n changed type from type 23 to bigint"]
    v10 = Column(2, "v", VARCHAR, 14)
    assert published_reasons(_pub(ID, v10), [ID, v10._replace(typmod=24)]) != []


def test_published_renames_are_paired_by_position() -> None:
    m = N._replace(name="m")
    assert published_reasons(_pub(ID, N), [ID, m]) == ["column n renamed to m"]
    # Renamed and retyped; and in the middle, between two unchanged columns.
    z = Column(3, "z", TEXT, -1)
    assert published_reasons(_pub(ID, N, z), [ID, m._replace(type_oid=INT8), z]) == [
        "column n renamed to m", "column m changed type from type 23 to type 20"]
    # Renamed and a column added after it (with a default): both.
    c = Column(3, "c", TEXT, -1, fills_existing=True)
    assert published_reasons(_pub(ID, N), [ID, m, c]) == [
        "column n renamed to m", "column c added with a value for existing rows"]
    # Two columns swapping names: re-synced too.
    assert published_reasons(_pub(ID, N), [ID._replace(name="n"), N._replace(name="id")])


def test_published_now_a_column_that_was_not() -> None:
    """DROP EXPRESSION on a generated column before the last column: it was there (older
    attnum than a published column) but unpublished, so its values never went out."""
    g = Column(2, "g", INT4, -1)
    assert published_reasons(_pub(ID, N._replace(attnum=3)), [ID, g, N._replace(attnum=3)]) == [
        "column g is published now, its values never were (DROP EXPRESSION, or a column list "
        "widened)"]
    # The last column: indistinguishable from ADD COLUMN g (NULL for existing rows).
    assert published_reasons(_pub(ID, N), [ID, N, Column(3, "g", INT4, -1)]) == []
