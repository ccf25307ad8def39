"""Reconnect rule: a slot ahead of what this producer confirmed hides a gap; behind replays."""

import pytest

from connector.errors import SourceError
from connector.replication.failover import check_slot_continuity


def test_missing_slot_is_refused_with_what_to_do() -> None:
    with pytest.raises(SourceError, match="does not exist on the primary now reached "
                       r"\(db2:5433\).*sync_replication_slots.*--snapshot initial") as info:
        check_slot_continuity("pgcdc", None, False, 0x1000, "db2:5433")
    assert not info.value.transient
    assert "\n" not in str(info.value)


def test_slot_ahead_of_our_confirmed_position_is_a_gap() -> None:
    with pytest.raises(SourceError, match="0/2000, ahead of the 0/1000") as info:
        check_slot_continuity("pgcdc", 0x2000, True, 0x1000)
    assert not info.value.transient


def test_slot_behind_or_at_our_position_resumes() -> None:
    check_slot_continuity("pgcdc", 0x0800, True, 0x1000)  # crash or lagging sync: replay
    check_slot_continuity("pgcdc", 0x1000, True, 0x1000)


def test_first_session_has_nothing_to_compare() -> None:
    check_slot_continuity("pgcdc", 0x2000, True, None)
