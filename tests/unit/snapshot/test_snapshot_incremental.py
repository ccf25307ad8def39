"""The incremental snapshot's pure core: watermark messages and the chunk window (DBLog)."""

from __future__ import annotations

import pytest

from connector.snapshot.incremental import ChunkWindow, Watermark


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


def test_changes_before_the_low_watermark_or_to_other_tables_keep_rows() -> None:
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


def test_changes_between_the_low_watermark_and_a_late_read_drop_their_rows() -> None:
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
