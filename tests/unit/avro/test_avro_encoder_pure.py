"""Pure helpers of the encoder module."""

from __future__ import annotations

from connector.avro.encoder import pg_timestamp_to_ms, transaction_id


def test_pg_timestamp_to_ms() -> None:
    assert pg_timestamp_to_ms(0) == 946_684_800_000  # 2000-01-01 UTC
    assert pg_timestamp_to_ms(1_500) == 946_684_800_001
    assert pg_timestamp_to_ms(-1_000) == 946_684_799_999


def test_transaction_id() -> None:
    assert transaction_id(731, 0x5_0000_1000) == f"731:{0x5_0000_1000}"

