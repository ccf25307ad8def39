"""What an operator should hear about a slot: it holds WAL while inactive, or too much of it.

A logical slot keeps every WAL segment from its restart position on, whether a consumer reads it
or not: an abandoned slot fills the server's disk, and one that falls behind (Kafka down, the
producer too slow) does the same more slowly. `pgcdc status` prints these warnings and
`pgcdc run` logs the lag one (see `Pipeline`), both against the same threshold.
"""

from __future__ import annotations

from .slots import SlotInfo

__all__ = ["DEFAULT_WAL_WARN_BYTES", "lag_warning", "slot_warnings"]

#: Default threshold of `--wal-warn-bytes` / YAML `wal_warn_bytes`.
DEFAULT_WAL_WARN_BYTES = 1 << 30


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def slot_warnings(slot: SlotInfo, threshold: int) -> list[str]:
    """The warnings `pgcdc status` prints for `slot` (none when it is healthy).

    A slot whose WAL is gone (`wal_status` lost) gets that one line alone: it holds nothing and
    no `pgcdc run` can resume it. One past max_slot_wal_keep_size (`unreserved`) is about to
    lose it at the next checkpoint."""
    if slot.wal_status == "lost":
        return [f"slot {slot.name} has lost WAL it needs (wal_status lost: it fell further behind "
                "than max_slot_wal_keep_size): `pgcdc run` refuses it; drop it and run "
                "`pgcdc run` again, which takes a new snapshot (docs/lost-slot.md)"]
    out = []
    if slot.wal_status == "unreserved":
        out.append(f"slot {slot.name} is past max_slot_wal_keep_size (wal_status unreserved): "
                   "the next checkpoint may remove WAL it needs; let `pgcdc run` catch up now "
                   "or raise max_slot_wal_keep_size (docs/lost-slot.md)")
    retained = slot.retained_bytes or 0
    if not slot.active:
        out.append(f"slot {slot.name} is inactive and holds {size(retained)} of WAL, growing "
                   "with every write: start `pgcdc run` for it, or drop it if it is no longer "
                   f"used (SELECT pg_drop_replication_slot('{slot.name}'))")
    if retained > threshold:
        out.append(f"slot {slot.name} retains {size(retained)} of WAL, more than "
                   f"{size(threshold)} (--wal-warn-bytes): the producer is stopped, behind, or "
                   "cannot deliver to Kafka; the server keeps this WAL until it is confirmed")
    return out


def lag_warning(slot: str, lag_bytes: int, threshold: int) -> str | None:
    """The warning `pgcdc run` logs when the WAL not yet confirmed passes the threshold."""
    if lag_bytes <= threshold:
        return None
    return (f"slot {slot}: {size(lag_bytes)} of WAL not yet confirmed, more than "
            f"{size(threshold)} (--wal-warn-bytes): Kafka is slow or unreachable, or the "
            "producer cannot keep up; PostgreSQL keeps this WAL until it is confirmed")
