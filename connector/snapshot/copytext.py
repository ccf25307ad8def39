"""One row of ``COPY ... TO STDOUT`` text output -> its values, as psycopg's row parser gives
them for columns read as ``text``: fields split at tabs, ``\\N`` is NULL, backslash escapes
undone (``\\b \\f \\n \\r \\t \\v``; a backslash before any other character stands for that
character -- PostgreSQL's COPY TO writes no octal or hex escapes).

The reference for the C path (`RowPlan.encode_copy`, connector/native/rowenc.c) and what the
snapshot uses for a line the C path declines.
"""

from __future__ import annotations

import re
from typing import Final

from connector.errors import SourceError

__all__ = ["parse_copy_text"]

_ESCAPE: Final = re.compile(rb"\\(.)", re.DOTALL)
_CONTROL: Final = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t",
                   b"v": b"\v"}


def _unescape(match: re.Match[bytes]) -> bytes:
    char = match.group(1)
    return _CONTROL.get(char, char)


def parse_copy_text(line: bytes | bytearray | memoryview) -> tuple[str | None, ...]:
    data = bytes(line)
    if data.endswith(b"\n"):
        data = data[:-1]
    values: list[str | None] = []
    for field in data.split(b"\t"):
        if field == b"\\N":
            values.append(None)
            continue
        if b"\\" in field:
            field = _ESCAPE.sub(_unescape, field)
        try:
            values.append(field.decode())
        except UnicodeDecodeError as exc:
            raise SourceError(f"COPY output is not valid UTF-8 at byte {exc.start} of a value "
                              "(the reader's client_encoding is UTF8)") from None
    return tuple(values)
