"""Log sequence numbers: 64-bit WAL positions, printed by PostgreSQL as two hex halves "X/Y"."""

from __future__ import annotations

_MAX_LSN = 0xFFFF_FFFF_FFFF_FFFF
_HEX = frozenset("0123456789abcdefABCDEF")


def lsn_to_str(lsn: int) -> str:
    """Format an LSN the way PostgreSQL prints `pg_lsn` (upper-case hex, no padding): 0/16B3748."""
    if not 0 <= lsn <= _MAX_LSN:
        raise ValueError(f"LSN out of range: {lsn}")
    return f"{lsn >> 32:X}/{lsn & 0xFFFF_FFFF:X}"


def str_to_lsn(text: str) -> int:
    """Parse "X/Y" (each half 1-8 hex digits, any case) into an int; ValueError if malformed."""
    high, sep, low = text.strip().partition("/")
    if not (sep and _is_hex32(high) and _is_hex32(low)):
        raise ValueError(f"not an LSN (expected X/Y in hex): {text!r}")
    return (int(high, 16) << 32) | int(low, 16)


def _is_hex32(part: str) -> bool:
    return 0 < len(part) <= 8 and all(c in _HEX for c in part)
