"""Which events of a table re-created upstream reach the lake table (spark_jobs/incarnation)."""

from hypothesis import given
from hypothesis import strategies as st

from connector.avro.schema import DROPPED, RELATION_ID
from spark_jobs.rules.changes import Position
from spark_jobs.rules.incarnation import (
    Decision,
    Drop,
    Incarnation,
    decide,
    drop_applies,
    drop_of,
    of_schema,
)

OLD = Incarnation(100, Position(50, 0))


def test_schema_names_its_relation_id():
    assert of_schema({"type": "record", RELATION_ID: 16384}) == 16384
    assert of_schema({"type": "record"}) is None


def test_properties_round_trip():
    assert Incarnation.of_properties(OLD.properties()) == OLD
    assert Incarnation.of_properties({}) is None


def test_same_incarnation_or_none_changes_nothing():
    assert decide(OLD, {100: Position(60, 0), None: Position(55, 0)}) == Decision(
        frozenset({100, None}), OLD, False)
    assert decide(None, {None: Position(1, 0)}) == Decision(frozenset({None}), None, False)


def test_a_new_table_or_an_unlabelled_one_adopts_its_only_incarnation():
    found = decide(None, {7: Position(80, 2), None: Position(70, 0)})
    assert found == Decision(frozenset({7, None}), Incarnation(7, Position(80, 2)), False)
    assert found.changes(None)


def test_a_newer_incarnation_replaces_the_table_and_only_its_events_apply():
    found = decide(OLD, {100: Position(60, 0), 200: Position(90, 3), None: Position(10, 0)})
    assert found == Decision(frozenset({200}), Incarnation(200, Position(90, 3)), True)


def test_late_events_of_an_older_incarnation_are_superseded():
    current = Incarnation(200, Position(90, 3))
    assert decide(current, {100: Position(60, 0), 200: Position(95, 0)}) == Decision(
        frozenset({None, 200}), current, False)
    # its first event seen is later than the table's, yet it is older: only a newer one's
    # events come after every event of the table's
    assert decide(current, {100: Position(89, 0)}).keep == frozenset({None, 200})


def test_several_at_once_on_a_table_without_one_take_the_newest_and_replace():
    found = decide(None, {1: Position(5, 0), 2: Position(9, 0), 3: Position(7, 0)})
    assert found == Decision(frozenset({2}), Incarnation(2, Position(9, 0)), True)


# A history of incarnations 1, 2, 3, ...: incarnation n's events at positions in
# [100 n, 100 n + 99]. Batches hold any subset of events, in any order: the table ends up
# holding the newest incarnation seen, and applies only its events (and unlabelled ones while
# no replacement happened).
events = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 99)), min_size=1, max_size=12)


@given(st.lists(events, min_size=1, max_size=5))
def test_the_table_follows_the_newest_incarnation_whatever_the_arrival(batches):
    current = None
    for batch in batches:
        firsts: dict[int | None, Position] = {}
        for inc, offset in batch:
            p = Position(100 * inc + offset, 0)
            firsts[inc] = min(firsts.get(inc, p), p)
        found = decide(current, firsts)
        newest_seen = max([current.relation_id] if current else [], default=0)
        newest = max(max(firsts), newest_seen)  # type: ignore[type-var]
        assert found.table is not None and found.table.relation_id == newest
        assert found.keep - {None} == {newest}
        assert found.replace == (current is not None and newest != current.relation_id
                                 or current is None and len(firsts) > 1)
        current = found.table


def test_the_spark_path_decides_one_new_incarnation_from_the_decoded_part():
    """A part of one relation id the table does not hold yet (a new table, a table re-created
    upstream) is decided from its decoded events' first position (`SparkPath`); any other
    mix (several ids, schemas without one, the table's own) by `_incarnation`."""
    from spark_jobs.events.decode import TopicPlan
    from spark_jobs.runtime.spark_path import SparkPath
    from spark_jobs.sinks.delta import DeltaMirror

    def plan(*labels: int | None) -> TopicPlan:
        return TopicPlan(schemas={i: {"type": "record"} if label is None
                                  else {"type": "record", RELATION_ID: label}
                                  for i, label in enumerate(labels)})

    sink = DeltaMirror.at("/lake", "s/t", "app")
    one_new = SparkPath._one_new_incarnation
    assert one_new(plan(7, 7), sink) == 7
    assert one_new(plan(7, 8), sink) is None
    assert one_new(plan(7, None), sink) is None
    assert one_new(plan(None), sink) is None
    sink.state.incarnation = Incarnation(7, Position(1, 0))
    assert one_new(plan(7), sink) is None
    assert one_new(plan(8), sink) == 8


# Drops (connector/replication/drops.py): the drop event of relation 100, last seen existing
# before WAL position 70 (the DROP committed after it).
DROP_OLD = Drop(100, 70)


def test_a_drop_schema_names_the_dropped_incarnation_and_where_it_was_last_seen():
    assert drop_of({"type": "record", RELATION_ID: 100, DROPPED: 70}) == DROP_OLD
    assert drop_of({"type": "record", RELATION_ID: 100}) is None  # a schema of changes


def test_a_drop_empties_the_table_holding_the_dropped_incarnation():
    # Alone in the batch, or after the incarnation's own changes: the decision keeps the table.
    for firsts in ({}, {100: Position(60, 0)}):
        decision = decide(OLD, firsts)
        assert drop_applies(decision.table, DROP_OLD, exists=True)
    # A new table whose first events are in the batch with its drop: created, then emptied.
    assert drop_applies(decide(None, {100: Position(60, 0)}).table, DROP_OLD, exists=True)


def test_a_drop_empties_a_table_holding_an_older_or_an_unknown_incarnation():
    older = Incarnation(50, Position(20, 0))  # dropped before 100 was created, unrecorded
    assert drop_applies(decide(older, {}).table, DROP_OLD, exists=True)
    assert drop_applies(decide(None, {}).table, DROP_OLD, exists=True)  # no relation id


def test_a_drop_never_empties_the_incarnation_created_again_after_it():
    # The re-created table's events (first at 80, after the DROP) precede the drop event in
    # the stream: in an earlier batch, or in the same one (the decision takes the new table).
    newer = Incarnation(200, Position(80, 0))
    assert not drop_applies(decide(newer, {}).table, DROP_OLD, exists=True)
    same_batch = decide(OLD, {100: Position(60, 0), 200: Position(80, 0)})
    assert same_batch.table == newer
    assert not drop_applies(same_batch.table, DROP_OLD, exists=True)


def test_a_drop_alone_creates_no_table():
    assert not drop_applies(decide(None, {}).table, DROP_OLD, exists=False)
