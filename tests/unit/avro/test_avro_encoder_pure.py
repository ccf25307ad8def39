"""Pure helpers of the encoder module."""

from __future__ import annotations

from connector.avro.encoder import transaction_id


def test_transaction_id() -> None:
    assert transaction_id(731, 0x5_0000_1000) == f"731:{0x5_0000_1000}"

