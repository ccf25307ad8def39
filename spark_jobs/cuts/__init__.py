"""Transaction-consistent cuts: the manifest readers use (manifest), the store of what
outlives a batch (pending: PendingStore, heartbeats), reads of the lake at a cut (read)."""
