"""The stream's START_REPLICATION options and the decoder told the same facts."""

from __future__ import annotations

import struct

import pytest

from connector.errors import DecodeError
from connector.pgoutput import StreamAbort
from connector.replication.stream import StreamOptions


@pytest.mark.parametrize("proto", [1, 2, 3, 4])
def test_the_decoder_is_told_what_the_command_asks_for(proto: int) -> None:
    options = StreamOptions("slot", "pub", proto)
    command = options.command().as_string(None)
    assert f"\"proto_version\" '{proto}'" in command
    assert "parallel" not in command  # streaming 'true' at most: Stream Abort without its LSN
    decoder = options.decoder()
    assert (decoder.proto_version, decoder.parallel_streaming) == (proto, False)
    plain = b"A" + struct.pack("!II", 7, 8)
    assert decoder.decode(plain) == StreamAbort(7, 8)
    with pytest.raises(DecodeError, match="must be 9 bytes, got 25"):
        decoder.decode(plain + bytes(16), lsn=1)
