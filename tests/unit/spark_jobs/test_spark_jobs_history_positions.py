"""Where the history's log ends per part (spark_jobs/history/positions.py): each bound is at
or after every logged event of its part, exact for the recent batches' parts."""

from __future__ import annotations

from spark_jobs.history.positions import RECENT_BATCHES, LoggedPositions
from spark_jobs.rules.changes import Position


def test_recent_parts_are_exact_and_the_others_bounded_by_the_floor() -> None:
    log = LoggedPositions(Position(50, 0), 7, None)
    log.parted_by(["k"])
    assert log.bound((1,)) == Position(50, 0)  # logged before: anywhere up to the end
    log.logged([((1,), Position(60, 0)), ((2,), Position(70, 1)), ((1,), Position(65, 0))])
    assert (log.bound((1,)), log.bound((2,)), log.bound((3,))) == (
        Position(65, 0), Position(70, 1), Position(50, 0))
    assert log.events == 10 and log.last == Position(70, 1)
    assert log.follows((1,), Position(66, 0)) and not log.follows((2,), Position(66, 0))
    for lsn in range(RECENT_BATCHES):  # older batches leave: their parts fall to the floor
        log.logged([((3,), Position(100 + lsn, 0))])
    assert log.bound((1,)) == log.bound((2,)) == Position(70, 1)
    assert log.bound((3,)) == Position(100 + RECENT_BATCHES - 1, 0)


def test_truncates_bound_every_part_and_new_parts_reset_the_bounds() -> None:
    log = LoggedPositions(None, 0, None)
    log.parted_by(["k"])
    assert log.follows((1,), Position(1, 0))  # nothing logged
    log.logged([((1,), Position(10, 0)), (None, Position(20, 0))])
    assert log.truncate_bound == Position(20, 0)
    assert not log.follows((2,), Position(15, 0)) and log.follows((2,), Position(21, 0))
    log.parted_by(["k", "a"])  # the keys changed: parts by other columns
    assert log.bound((1, None)) == log.bound((1,)) == Position(20, 0)


def test_a_late_event_does_not_lower_its_parts_bound() -> None:
    """A part's late event (behind what the log already holds of it) is logged in a recent
    batch: the bound stays at the part's newest logged event, whether that one is in an
    older recent batch or already below the floor."""
    log = LoggedPositions(Position(50, 0), 1, None)
    log.parted_by(["k"])
    log.logged([((1,), Position(100, 0))])
    log.logged([((1,), Position(90, 0))])  # late: 100 is logged
    assert log.bound((1,)) == Position(100, 0)
    assert not log.follows((1,), Position(95, 0))
    for lsn in range(RECENT_BATCHES):  # 100's batch leaves the recent ones
        log.logged([((2,), Position(60 + lsn, 0))])
    log.logged([((1,), Position(80, 0))])  # late again, against an event below the floor
    assert log.bound((1,)) >= Position(100, 0)
    assert not log.follows((1,), Position(95, 0))
