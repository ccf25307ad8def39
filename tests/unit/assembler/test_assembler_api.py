"""Small API details: limits validation, state introspection, size estimates, reprs."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.assembler import Assembler, RelationCache, estimate_size
from connector.errors import DecodeError
from connector.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Prepare,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    Update,
)
from tests.support.assembler_script import TS, Script, dele, ins, relation, run, tmsg, upd


def test_negative_limits_are_rejected() -> None:
    with pytest.raises(ValueError):
        Assembler(spill_bytes=-1)
    with pytest.raises(ValueError):
        Assembler(spill_changes=-1)


def test_state_introspection() -> None:
    asm = Assembler()
    assert not asm.in_transaction and asm.pending_xids == ()
    asm.feed(0x10, Begin(0x9000, TS, 42))
    assert asm.in_transaction and asm.pending_xids == (42,)


def test_stream_start_of_a_prepared_transaction_is_an_error() -> None:
    asm = Assembler()
    for lsn, m in Script().add(StreamStart(5, True), StreamStop(),
                               StreamPrepare(0, 1, 2, TS, 5, "g")).pairs:
        asm.feed(lsn, m)
    with pytest.raises(DecodeError, match="already prepared"):
        asm.feed(0x9999, StreamStart(5, True))


def test_prepare_gid_must_match() -> None:
    s = Script().begin_prepare(5, "g")
    asm = Assembler()
    run(s.pairs, asm)
    with pytest.raises(DecodeError, match="ends prepared transaction 5"):
        asm.feed(0x9999, Prepare(0, 1, 2, TS, 5, "other"))


def test_size_estimates_grow_with_the_data() -> None:
    small, wide = ins(10, "1", "x"), ins(10, "1", "x" * 1000)
    assert estimate_size(wide) - estimate_size(small) == 999
    assert estimate_size(upd(10, "1", "x")) > estimate_size(small)
    assert estimate_size(Update(None, 10, "O", ("1", "y" * 100), ("1", "x"))) > 300
    assert estimate_size(dele(10, "1")) > 0
    assert estimate_size(ins(10, None, UNCHANGED_TOAST)) < estimate_size(small)
    assert estimate_size(tmsg("p", b"z" * 500)) > 500
    assert estimate_size(Truncate(None, 0, (1, 2))) > 0


def test_plain_transaction_starting_with_truncate_and_message_spills(tmp_path: Path) -> None:
    s = Script().add(relation(10), relation(11)).begin(5, 0x5000)
    s.truncate(10, 11).add(tmsg("m"), *(upd(10, str(i), "x") for i in range(40)),
                           *(dele(10, str(i)) for i in range(40))).commit(0x5000)
    expected = run(s.pairs)[0]
    asm = Assembler(spill_dir=tmp_path, spill_bytes=1)
    (txn,) = run(s.pairs, asm)
    assert txn.changes.spilled and not expected.changes.spilled
    assert list(txn.changes) == list(expected.changes)
    assert "spilled" in repr(txn.changes) and "in memory" in repr(expected.changes)
    txn.close()
    assert asm.open_spill_files == 0


def test_relation_cache() -> None:
    cache = RelationCache()
    r = relation(10)
    cache.add_relation(r)
    assert cache.get(10) is r and cache.get(11) is None and cache.relations[10] is r
