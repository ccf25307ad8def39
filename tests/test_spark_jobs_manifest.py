"""The cuts manifest: recorded once per batch, read back in position order."""

from spark_jobs.manifest import Cut, append_cut, first_cut_at_or_after, read_cuts


def test_cuts_round_trip_once_per_batch_in_position_order(tmp_path):
    target = str(tmp_path)
    assert read_cuts(target) == []
    later = Cut(0x16B374D848, 3, {"public/a": 4, "public/b": 2}, 1_700_000_000_123)
    assert append_cut(target, later, "app")
    assert not append_cut(target, later, "app")  # the same batch re-run
    assert append_cut(target, Cut(5, 4, {"public/a": 5}), "app")
    cuts = read_cuts(target)
    assert [(c.lsn, c.batch_id, dict(c.versions)) for c in cuts] == [
        (5, 4, {"public/a": 5}), (0x16B374D848, 3, {"public/a": 4, "public/b": 2})]
    assert cuts[1].lsn_text == "16/B374D848" and cuts[1].source_ts_ms == 1_700_000_000_123
    assert first_cut_at_or_after(cuts, 6) == cuts[1]
    assert first_cut_at_or_after(cuts, 0x16B374D849) is None
