"""The incremental snapshot's pure core: watermark messages and the chunk window (DBLog)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.snapshot.incremental.window import ChunkAcks, ChunkWindow, SentChunk, Watermark


def test_watermark_round_trip() -> None:
    for mark in (Watermark("a1b2", 0, False), Watermark("a1b2", 17, True)):
        assert Watermark.parse(mark.content()) == mark


@pytest.mark.parametrize("content", [b"", b"x", b"run:1:middle", b":1:low", b"run:one:low",
                                     b"\xff\xfe:1:low", b"run:1"])
def test_other_messages_are_not_watermarks(content: bytes) -> None:
    assert Watermark.parse(content) is None


ROWS = {b"k1": b"1\ta", b"k2": b"2\tb", b"k3": b"3\tc"}


def _window() -> ChunkWindow:
    window = ChunkWindow(3, relation_id=42)
    window.load(dict(ROWS))
    return window


def test_changes_inside_the_window_drop_their_rows() -> None:
    window = _window()
    window.low_seen()
    window.changed(42, b"k2")
    window.changed(42, b"k9")  # a key the chunk did not read: nothing to drop
    assert window.high_seen() == [(b"k1", b"1\ta"), (b"k3", b"3\tc")]


def test_changes_before_the_oldest_open_lsn_or_to_other_tables_keep_rows() -> None:
    window = _window()
    window.changed(42, b"k1")  # committed before l: the chunk row already shows it
    window.low_seen()
    window.changed(7, b"k3")  # another table's key that happens to encode alike
    assert window.high_seen() == [(b"k1", b"1\ta"), (b"k2", b"2\tb"),
                                  (b"k3", b"3\tc")]


def test_high_watermark_before_low_is_refused() -> None:
    with pytest.raises(RuntimeError, match="high watermark before the low"):
        _window().high_seen()
    unread = ChunkWindow(3, relation_id=42)
    unread.low_seen()
    with pytest.raises(RuntimeError, match="before the read"):
        unread.high_seen()


def test_changes_between_the_oldest_open_lsn_and_a_late_read_drop_their_rows() -> None:
    window = ChunkWindow(3, relation_id=42)
    window.changed(42, b"k3")  # before the low watermark: the read shows it
    window.low_seen()
    window.changed(42, b"k1")  # in the window, before the rows were read
    window.changed(7, b"k2")
    window.load(dict(ROWS))
    window.changed(42, b"k2")  # in the window, after
    assert window.high_seen() == [(b"k3", b"3\tc")]


def test_a_truncate_before_a_late_read_leaves_nothing_of_it() -> None:
    """The read may have started before the truncate was visible to it."""
    window = ChunkWindow(3, relation_id=42)
    window.low_seen()
    window.truncated(42)
    window.load(dict(ROWS))
    assert window.high_seen() == []


def test_a_truncate_inside_the_window_drops_every_row() -> None:
    window = _window()
    window.truncated(42)
    assert len(window.rows) == 3  # before the low watermark: the chunk read after it
    window.low_seen()
    window.truncated(7)
    assert len(window.rows) == 3
    window.truncated(42)
    assert window.high_seen() == []


# ------------------------------------------------------------------ when a request is done


def _sent(end_lsn: int, request: int, table_index: int, rows: int = 10) -> SentChunk:
    return SentChunk(end_lsn, request, table_index, None, rows)


def test_a_request_is_not_done_while_its_last_chunk_waits_for_kafka() -> None:
    acks = ChunkAcks()
    acks.sent(_sent(100, request=1, table_index=1))  # the only table, read in one chunk
    assert acks.acknowledged(None) == []  # nothing known acknowledged yet
    assert acks.acknowledged(99) == []  # the broker has not confirmed the chunk
    assert not acks.may_finish(1, table_index=1, tables=1)
    assert [c.rows for c in acks.acknowledged(100)] == [10]
    assert acks.may_finish(1, table_index=1, tables=1)


def test_every_acknowledged_chunk_is_counted_the_last_one_too() -> None:
    acks = ChunkAcks()
    for n in range(40):
        acks.sent(_sent(100 + n, request=7, table_index=0 if n < 39 else 1))
    counted = acks.acknowledged(120)
    assert len(counted) == 21 and not acks.may_finish(7, table_index=1, tables=1)
    counted += acks.acknowledged(10_000)
    assert len(counted) == 40 and [c.end_lsn for c in counted] == list(range(100, 140))
    assert counted[-1].table_index == 1
    assert acks.may_finish(7, table_index=1, tables=1)


def test_a_request_with_tables_left_is_not_done() -> None:
    acks = ChunkAcks()
    assert not acks.may_finish(1, table_index=1, tables=2)
    assert acks.may_finish(1, table_index=2, tables=2)


def test_another_requests_chunks_do_not_hold_a_request_back() -> None:
    acks = ChunkAcks()
    acks.sent(_sent(100, request=1, table_index=1))
    acks.sent(_sent(200, request=2, table_index=0))
    assert [c.request for c in acks.acknowledged(150)] == [1]
    assert acks.may_finish(1, table_index=1, tables=1)
    assert not acks.may_finish(2, table_index=1, tables=1)
    assert acks.pending(2) and not acks.pending(1)


@given(st.dictionaries(st.binary(min_size=1, max_size=2), st.binary(max_size=2), max_size=8),
       st.lists(st.tuples(st.binary(min_size=1, max_size=2), st.booleans()), max_size=12),
       st.integers(0, 12), st.integers(0, 12))
def test_a_read_handed_over_late_drops_every_key_changed_in_the_window(
        rows: dict[bytes, bytes], changes: list[tuple[bytes, bool]], opened: int,
        loaded: int) -> None:
    """The reader's thread (connector/snapshot/incremental/reader.py) hands a chunk to the
    stream's thread at any point between the low watermark and the high one: whatever that
    point, the rows produced at the high watermark are the rows read minus every key the
    stream changed (or all, after a truncate) once the window opened, in key order."""
    window = ChunkWindow(1, relation_id=42)
    opened = min(opened, len(changes))  # changes[:opened] come before the low watermark
    loaded = min(max(opened, loaded), len(changes))  # the hand-over, after the open
    dropped: set[bytes] = set()
    emptied = False
    for i, (key, truncate) in enumerate([*changes, (b"", False)]):
        if i == opened:
            window.low_seen()
        if i == loaded:
            window.load(dict(sorted(rows.items())))
        if i == len(changes):
            break
        if truncate:
            window.truncated(42)
            if i >= opened:
                emptied, dropped = True, set()
        else:
            window.changed(42, key)
            if i >= opened:
                dropped.add(key)
    expected = [] if emptied else [(k, v) for k, v in sorted(rows.items()) if k not in dropped]
    assert window.high_seen() == expected
