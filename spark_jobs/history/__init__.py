"""History tables (SCD type 2): the versions of each source row (versions, pure), where each
part's logged events end (positions), the delta-rs sink (sink), point-in-time reads (read)."""
