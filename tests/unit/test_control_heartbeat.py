"""The heartbeat message's content (`Pipeline._heartbeat`): the slot's restart_lsn as text."""

from __future__ import annotations

import pytest

from connector.control import heartbeat_restart_lsn


def test_the_restart_lsn_is_read_from_the_message_content() -> None:
    assert heartbeat_restart_lsn(b"1/2A0") == 0x1_0000_02A0


@pytest.mark.parametrize("content", [b"", b"restart", b"\xff/1"])
def test_no_lsn_says_nothing(content: bytes) -> None:
    """Heartbeats of an older producer (empty), or a slot the heartbeat's query did not find;
    anything else is no reason to stop the producer."""
    assert heartbeat_restart_lsn(content) is None
