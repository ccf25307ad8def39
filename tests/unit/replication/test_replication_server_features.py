"""The server-version facts, in their one place (connector/replication/features.py)."""

from __future__ import annotations

import pytest

from connector.replication import ServerFeatures


@pytest.mark.parametrize("version, protocol", [
    (130015, 1), (140012, 2), (150010, 3), (160006, 4), (170002, 4), (180001, 4)])
def test_protocol_version_is_the_highest_the_server_accepts(version: int, protocol: int) -> None:
    assert ServerFeatures(version).protocol_version == protocol


def test_each_fact_starts_at_its_release() -> None:
    def since(fact: str) -> int:
        return min(m for m in range(10, 20) if getattr(ServerFeatures(m * 10000), fact))

    assert ServerFeatures(180001).major == 18
    assert since("tid_range_scans") == 14
    assert since("publication_column_lists") == 15
    assert since("slot_option_list") == 15
    assert since("failover_slots") == 17
    assert since("publishes_generated_columns") == 18
