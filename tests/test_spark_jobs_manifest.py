"""The cuts manifest: recorded once per batch, read back in position order."""

from spark_jobs.cuts.manifest import Cut, append_cut, first_cut_at_or_after, read_cuts


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


def test_tombstone_versions_ride_in_versions_under_keys_no_table_path_can_be(tmp_path):
    """A cut's tombstone versions are stored beside its table versions and read back apart;
    a cut recorded before they existed has none (readers then read the latest tombstones)."""
    from deltalake import DeltaTable

    target = str(tmp_path)
    assert append_cut(target, Cut(7, 1, {"public/a": 3}), "app")
    assert append_cut(target, Cut(9, 2, {"public/a": 4, "public/b": 1},
                                  tombstones={"public/a": 2}), "app")
    stored = DeltaTable(f"{target}/_pgcdc/cuts").to_pyarrow_table().to_pylist()
    assert {"public/a": 4, "public/b": 1, "_pgcdc/tombstones/public/a": 2} in [
        dict(r["versions"]) for r in stored]
    old, new = read_cuts(target)
    assert (dict(old.versions), dict(old.tombstones)) == ({"public/a": 3}, {})
    assert (dict(new.versions), dict(new.tombstones)) == ({"public/a": 4, "public/b": 1},
                                                          {"public/a": 2})
