"""What `pgcdc status` says about a slot (connector/replication/health.py)."""

from __future__ import annotations

from connector.replication.health import DEFAULT_WAL_WARN_BYTES, slot_warnings
from connector.replication.slots import SlotInfo


def slot(wal_status: str, active: bool = False, retained: int | None = 416) -> SlotInfo:
    return SlotInfo("shop", "pgoutput", "postgres", active, None, 1, 1, wal_status, retained)


def test_a_lost_slot_is_named_lost_not_inactive() -> None:
    """A slot whose WAL is gone cannot be resumed: `start pgcdc run for it` would be wrong."""
    warnings = slot_warnings(slot("lost", retained=None), DEFAULT_WAL_WARN_BYTES)
    assert len(warnings) == 1
    assert "has lost WAL it needs" in warnings[0] and "new snapshot" in warnings[0]
    assert "start `pgcdc run` for it" not in warnings[0]


def test_an_unreserved_slot_is_warned_before_it_is_lost() -> None:
    warnings = slot_warnings(slot("unreserved", active=True), DEFAULT_WAL_WARN_BYTES)
    assert len(warnings) == 1 and "past max_slot_wal_keep_size" in warnings[0]


def test_a_healthy_slot_has_no_warning() -> None:
    assert slot_warnings(slot("reserved", active=True), DEFAULT_WAL_WARN_BYTES) == []
    assert slot_warnings(slot("extended", active=True), DEFAULT_WAL_WARN_BYTES) == []
