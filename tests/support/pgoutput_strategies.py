"""Hypothesis strategies generating every pgoutput message kind with in-range field values."""

from __future__ import annotations

from hypothesis import strategies as st

from connector.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    BeginPrepare,
    BinaryValue,
    ColumnValue,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    Message,
    Origin,
    PgOutputMessage,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    Type,
    Update,
)

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFF_FFFF)
i32 = st.integers(-(2**31), 2**31 - 1)
lsn = st.integers(0, 2**64 - 1)
ts = st.integers(-(2**63), 2**63 - 1)
xid = u32
opt_xid = st.none() | xid
# Strings on the wire are NUL-terminated UTF-8: no NUL, no lone surrogates.
name = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
               max_size=20)
text_value = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)

column_value: st.SearchStrategy[ColumnValue] = st.one_of(
    st.none(), st.just(UNCHANGED_TOAST), text_value, st.binary(max_size=40).map(BinaryValue))
tuple_data = st.lists(column_value, max_size=12).map(tuple)
old_kind = st.sampled_from(["K", "O"])

relation_column = st.builds(RelationColumn, u8, name, u32, i32)


@st.composite
def updates(draw: st.DrawFn) -> Update:
    kind = draw(st.none() | old_kind)
    old = None if kind is None else draw(tuple_data)
    return Update(draw(opt_xid), draw(u32), kind, old, draw(tuple_data))  # type: ignore[arg-type]


@st.composite
def stream_aborts(draw: st.DrawFn) -> StreamAbort:
    if draw(st.booleans()):
        return StreamAbort(draw(xid), draw(xid), draw(lsn), draw(ts))
    return StreamAbort(draw(xid), draw(xid))


STRATEGIES: dict[type, st.SearchStrategy[PgOutputMessage]] = {
    Begin: st.builds(Begin, lsn, ts, xid),
    Message: st.builds(Message, opt_xid, u8, lsn, name, st.binary(max_size=60)),
    Commit: st.builds(Commit, u8, lsn, lsn, ts),
    Origin: st.builds(Origin, lsn, name),
    Relation: st.builds(Relation, opt_xid, u32, name, name, st.sampled_from("dnfi"),
                        st.lists(relation_column, max_size=8).map(tuple)),
    Type: st.builds(Type, opt_xid, u32, name, name),
    Insert: st.builds(Insert, opt_xid, u32, tuple_data),
    Update: updates(),
    Delete: st.builds(Delete, opt_xid, u32, old_kind, tuple_data),
    Truncate: st.builds(Truncate, opt_xid, u8, st.lists(u32, max_size=6).map(tuple)),
    StreamStart: st.builds(StreamStart, xid, st.booleans()),
    StreamStop: st.just(StreamStop()),
    StreamCommit: st.builds(StreamCommit, xid, u8, lsn, lsn, ts),
    StreamAbort: stream_aborts(),
    BeginPrepare: st.builds(BeginPrepare, lsn, lsn, ts, xid, name),
    Prepare: st.builds(Prepare, u8, lsn, lsn, ts, xid, name),
    CommitPrepared: st.builds(CommitPrepared, u8, lsn, lsn, ts, xid, name),
    RollbackPrepared: st.builds(RollbackPrepared, u8, lsn, lsn, ts, ts, xid, name),
    StreamPrepare: st.builds(StreamPrepare, u8, lsn, lsn, ts, xid, name),
}

any_message: st.SearchStrategy[PgOutputMessage] = st.one_of(*STRATEGIES.values())


def parallel(msg: PgOutputMessage) -> bool:
    """Whether the message is only sent with streaming 'parallel' (a Stream Abort with its LSN
    and time), so decode it with parallel_streaming=True."""
    return isinstance(msg, StreamAbort) and msg.abort_lsn is not None


def streamed(msg: PgOutputMessage) -> bool:
    """Whether the message was written with the in-stream xid (so decode with streaming=True)."""
    return getattr(msg, "xid", None) is not None and isinstance(
        msg, (Message, Relation, Type, Insert, Update, Delete, Truncate))
