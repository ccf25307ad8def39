"""Bounded memory: transactions over the limit spill to disk, come back identical and in
order, and leave no file behind."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from connector.assembler import Assembler, SpillFile
from connector.pgoutput import Insert, Relation, StreamStart, StreamStop, Truncate
from tests.support.assembler_script import (
    Script,
    change_values,
    ins,
    open_fds_under,
    relation,
    run,
    tmsg,
    transactions,
)

WIDE = "w" * 300


def big_streamed_script() -> Script:
    """Two interleaved streamed transactions with subxact aborts at many positions, a relation
    change, messages and truncates; then a plain one and a prepared one."""
    r1 = relation(10, "a")
    r2 = relation(10, "a", columns=("id", "v", "extra"))
    s = Script().add(r1, relation(11, "b"))
    s.block(100, *(ins(10, f"a{i}", WIDE, xid=100) for i in range(30)), first=True)
    s.block(200, *(ins(11, f"b{i}", WIDE, xid=200) for i in range(10)), first=True)
    s.block(100, tmsg("m1", b"c" * 50, xid=100), *(ins(10, f"k{i}", WIDE, xid=102)
                                                   for i in range(7)))
    s.block(100, *(ins(10, f"s{i}", WIDE, xid=101) for i in range(25)))  # later aborted
    s.stream_abort(100, 101)
    s.block(200, *(ins(11, f"c{i}", WIDE, xid=201) for i in range(40)))
    s.block(100, r2, *(ins(10, f"n{i}", WIDE, "e", xid=100) for i in range(12)))
    s.add(StreamStart(100, False), Truncate(103, 0, (10, 11)), StreamStop())
    s.block(200, *(ins(11, f"d{i}", WIDE, xid=202) for i in range(5)))
    s.stream_abort(200, 202)  # cut inside the in-memory tail
    s.block(200, *(ins(11, f"e{i}", WIDE, xid=200) for i in range(3)))
    s.stream_commit(200)
    s.stream_commit(100)
    s.plain(300, *(ins(10, f"p{i}", WIDE, "e") for i in range(50)))
    s.begin_prepare(400, "g").add(*(ins(11, f"q{i}", WIDE) for i in range(20)))
    s.prepare(400, "g").commit_prepared(400, "g", 0x9999_0000)
    return s


LIMITS = [
    {"spill_bytes": 0},
    {"spill_bytes": 1},
    {"spill_bytes": 2_000},
    {"spill_bytes": 20_000},
    {"spill_changes": 0},
    {"spill_changes": 1},
    {"spill_changes": 3},
    {"spill_changes": 17},
]


@pytest.mark.parametrize("limits", LIMITS, ids=lambda d: ",".join(f"{k}={v}" for k, v in
                                                                  d.items()))
def test_spilled_output_is_identical(tmp_path: Path, limits: dict[str, int]) -> None:
    s = big_streamed_script()
    expected = transactions(run(s.pairs))
    assert not any(t.changes.spilled for t in expected)
    asm = Assembler(spill_dir=tmp_path, **limits)
    got = transactions(run(s.pairs, asm))
    assert [t.xid for t in got] == [200, 100, 300, 400]
    assert any(t.changes.spilled for t in got)
    for e, g in zip(expected, got, strict=True):
        assert g[:4] == e[:4] and g[5:] == e[5:]  # every field but `changes`
        assert len(g.changes) == len(e.changes)
        assert list(g.changes) == list(e.changes)
        assert list(g.changes) == list(e.changes)  # iterable again
    assert change_values(got[1])[:39] == ([f"a{i}" for i in range(30)] + ["m1"]
                                          + [f"k{i}" for i in range(7)] + ["n0"])
    # nothing ever has a name in the spill directory
    assert list(tmp_path.iterdir()) == []
    # the files are open only while a transaction holds them
    assert asm.open_spill_files > 0 and open_fds_under(tmp_path)
    for t in got:
        t.close()
    assert asm.open_spill_files == 0
    assert open_fds_under(tmp_path) == []


def test_spilled_relations_keep_identity(tmp_path: Path) -> None:
    r = relation(10)
    s = Script().add(r).plain(5, *(ins(10, str(i), WIDE) for i in range(100)))
    (txn,) = run(s.pairs, Assembler(spill_dir=tmp_path, spill_changes=10))
    assert txn.changes.spilled
    assert all(c.relation is r for c in txn.changes)
    assert [c.position for c in txn.changes] == list(range(100))
    txn.close()


def test_abort_frees_the_spill_file_at_once(tmp_path: Path) -> None:
    s = Script().add(relation(10))
    s.block(100, *(ins(10, str(i), WIDE, xid=100) for i in range(50)), first=True)
    asm = Assembler(spill_dir=tmp_path, spill_bytes=1_000)
    run(s.pairs, asm)
    assert asm.open_spill_files == 1 and len(open_fds_under(tmp_path)) == 1
    s2 = Script(s.lsn).stream_abort(100, 100)
    run(s2.pairs, asm)
    assert asm.open_spill_files == 0 and open_fds_under(tmp_path) == []


def test_rollback_prepared_frees_the_spill_file(tmp_path: Path) -> None:
    s = Script().add(relation(10))
    s.begin_prepare(7, "g").add(*(ins(10, str(i), WIDE) for i in range(50))).prepare(7, "g")
    asm = Assembler(spill_dir=tmp_path, spill_bytes=1_000)
    run(s.pairs, asm)
    assert asm.open_spill_files == 1
    run(Script(s.lsn).rollback_prepared(7, "g").pairs, asm)
    assert asm.open_spill_files == 0 and open_fds_under(tmp_path) == []


def test_dropping_the_transaction_frees_the_file(tmp_path: Path) -> None:
    s = Script().add(relation(10)).plain(5, *(ins(10, str(i), WIDE) for i in range(50)))
    asm = Assembler(spill_dir=tmp_path, spill_changes=5)
    (txn,) = run(s.pairs, asm)
    assert txn.changes.spilled and open_fds_under(tmp_path)
    del txn
    gc.collect()
    assert asm.open_spill_files == 0 and open_fds_under(tmp_path) == []


def test_close_frees_buffered_and_emitted_files(tmp_path: Path) -> None:
    s = Script().add(relation(10)).plain(5, *(ins(10, str(i), WIDE) for i in range(50)))
    s.block(100, *(ins(10, str(i), WIDE, xid=100) for i in range(50)), first=True)
    with Assembler(spill_dir=tmp_path, spill_changes=5) as asm:
        (txn,) = run(s.pairs, asm)
        assert asm.open_spill_files == 2
    assert asm.open_spill_files == 0 and open_fds_under(tmp_path) == []
    with pytest.raises(ValueError, match="closed"):
        list(txn.changes)


def test_transaction_context_manager_closes(tmp_path: Path) -> None:
    s = Script().add(relation(10)).plain(5, *(ins(10, str(i), WIDE) for i in range(20)))
    asm = Assembler(spill_dir=tmp_path, spill_changes=2)
    (txn,) = run(s.pairs, asm)
    with txn as t:
        assert len(list(t.changes)) == 20
    assert asm.open_spill_files == 0


def test_memory_of_a_spilled_transaction_stays_bounded(tmp_path: Path) -> None:
    # after spilling, at most one chunk stays in memory
    asm = Assembler(spill_dir=tmp_path, spill_bytes=10_000)
    s = Script().add(relation(10))
    s.block(100, *(ins(10, str(i), WIDE, xid=100) for i in range(2_000)), first=True)
    run(s.pairs, asm)
    txn = asm._streams[100]  # white-box: the buffered tail
    assert txn.spill is not None and txn.spill.count + len(txn.changes) == 2_000
    assert len(txn.changes) < 40 and txn.est <= 10_000 + 1_000
    asm.close()


def test_spill_file_truncate_and_read(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    rel = relation(10)
    entries = [(0, Insert(None, 10, (str(i),)), i) for i in range(10)]
    spill.append(entries[:4])
    spill.append(entries[4:7])
    spill.append(entries[7:])
    assert spill.count == 10
    assert [e for b in spill.batches() for e in b] == entries
    kept = spill.truncate(5)  # inside the second batch: cut at its start, return its head
    assert kept == entries[4:5] and spill.count == 4
    spill.append(kept)
    assert [e for b in spill.batches() for e in b] == entries[:5]
    assert spill.truncate(4) == [] and spill.count == 4  # batch boundary
    assert spill.truncate(99) == []
    assert spill.truncate(0) == entries[:0] and spill.count == 0 and spill.size == 0
    spill.close()
    spill.close()
    assert spill.closed and isinstance(rel, Relation)


def test_change_count_limit_is_exact_for_plain_transactions(tmp_path: Path) -> None:
    asm = Assembler(spill_dir=tmp_path, spill_changes=5)
    s = Script().add(relation(10)).begin(5, 0x5000)
    s.add(*(ins(10, str(i), "x") for i in range(5)))
    run(s.pairs, asm)
    assert asm.open_spill_files == 0  # 5 changes: at the limit, not over it
    run(Script(s.lsn).add(ins(10, "5", "x")).pairs, asm)
    assert asm.open_spill_files == 1  # the 6th spills
    (txn,) = run(Script(s.lsn + 0x1000).commit(0x5000).pairs, asm)
    assert [c.message.new[0] for c in txn.changes] == [str(i) for i in range(6)]
    txn.close()


def test_byte_estimate_triggers_spill(tmp_path: Path) -> None:
    # ~100 KiB of wide rows against a 50 KiB limit: spilled; against 1 MiB: not
    s = Script().add(relation(10))
    s.block(100, *(ins(10, str(i), WIDE, xid=100) for i in range(250)), first=True)
    small = Assembler(spill_dir=tmp_path, spill_bytes=50 * 1024)
    large = Assembler(spill_dir=tmp_path, spill_bytes=1024 * 1024)
    run(s.pairs, small)
    run(s.pairs, large)
    assert small.open_spill_files == 1 and large.open_spill_files == 0
    small.close()
