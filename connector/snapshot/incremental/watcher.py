"""The table watcher: tables that come and go while `pgcdc run` streams.

pgoutput sends no DDL, so the producer polls the catalog (every `WATCH_INTERVAL_S`; an event
trigger would need superuser rights to install):

* A new table matching ``--tables``, when pgcdc manages the publication (a table list: for
  patterns, and for ``*``, which lists every table, `managed_patterns`): it is added to the
  publication (its changes are streamed from that commit on) and an incremental snapshot of it
  is requested (`signals`), which publishes the rows written before, in the window argument of
  `window`: no row is missed or overwritten by an older one. A table created while pgcdc was
  stopped is added here too, at the first check after a restart (not by `ensure_publication`,
  `add_later`): its rows were written while it was in no publication, so only the snapshot
  can carry them.
* A ``FOR ALL TABLES`` publication (only with ``--all-tables-publication``, or one the user
  made) includes a new table from its creation, so every row of it is streamed and no snapshot
  is needed; the table is only logged.
* A new table without a key (``--keyless-tables``, `ReplicationAdmin.apply_keyless_policy`):
  once published, PostgreSQL rejects the application's UPDATE and DELETE on it, so a CDC tool
  must not publish it by default. The list leaves it out (``refuse``, the default, and
  ``skip``: one warning naming it, the gauge ``pgcdc_keyless_tables_left_out``) and adds it,
  with its snapshot, at the first check after it gets a primary key or a replica identity; or
  it sets REPLICA IDENTITY FULL before adding it (``full``): no moment where writes fail.
  The next start tolerates what this left out, with the same warning (``refuse`` refuses only
  a first start and tables named exactly: `keyless.keyless_refused`).
  A table keyed by the whole row (REPLICA IDENTITY FULL: ``full``, or set by the user) joins
  without a snapshot, which needs a key (`driver`): the rows written before it joined (within
  one check, ~2 s, of its creation for ``full``) are not in its topic, its changes from then on
  are; a warning names it.
  FOR ALL TABLES has already published it (the explicit setting's hazard): ``full`` sets
  REPLICA IDENTITY FULL at the next check (UPDATE and DELETE fail until then, ~2 s), ``refuse``
  logs how to fix it (they fail until it is fixed); ``skip`` is refused with it at start.
* A table that no longer matches ``--tables`` (renamed, moved to another schema) is removed
  from the publication when pgcdc manages it; one that left the publication (dropped, removed
  by hand, or so) is logged. Its topic stays.
* A published table dropped (its relation id, remembered from the previous check, exists no
  more; `connector.replication.drops.DropWatch`): a ``pgcdc.drop`` message records it in the
  WAL, which the producer turns into a drop event on its topic, so the lake table is emptied
  (docs/events.md "Dropped tables"). A standby cannot write it: a warning names the statement
  to run on the primary.
* A partition attached to a published partitioned table (or created as its partition) while
  pgcdc runs: PostgreSQL streams none of the rows it held before, so an incremental snapshot of
  that partition alone reads them into the topic it is published to (the root's with
  publish_via_partition_root); one detached or dropped is a warning, its rows stay in the
  root's topic (`connector.replication.partitions`), unless ``detach_deletes`` deleted a
  DETACHed one's keys there (its event trigger; then an INFO line, a DROP TABLE's rows stay).
  Without a primary to write the request on (a standby), a warning names the `pgcdc snapshot`
  to run.
* The signal table (`signals`, `connector.names.SIGNAL_TABLE`) never joins a list pgcdc
  manages: its rows are pgcdc's own. FOR ALL TABLES publishes it; the producer drops its
  changes (connector/publisher.py) and it is not logged as a published table here.
* A table the application drops or renames between two statements of a check (listed, then
  named in ALTER PUBLICATION, or read) is "dropped since": left out of what the check does,
  at most one INFO line (`ReplicationAdmin` resolves names with to_regclass, and runs a
  statement naming tables again without the vanished ones); the next check sees what
  replaced it. No reconnect.
* A migration holding a lock (ALTER TABLE, LOCK TABLE, CREATE INDEX in an open transaction)
  stalls nothing: the catalog reads here open no relation (the published tables come from the
  catalogs, `connector.replication.lock_free`), and what must (ALTER PUBLICATION of a new
  table, a partition's rows) gives up after `lock_free.LOCK_WAIT_MS`: the check runs again at
  the next interval (one INFO line while the lock is held), and the stream goes on meanwhile.
* A grant missing (a new table the role does not own, the signal table) stops `pgcdc run` with
  the one line naming it (`PrivilegeError`): retrying cannot grant it, and a table left out
  silently would lose its changes. Catalog reads that fail otherwise are retried.
"""

from __future__ import annotations

import logging
import time

import psycopg

from connector import metrics
from connector.errors import SourceError, first_line, is_privilege_error
from connector.names import SIGNAL_TABLE, TableName
from connector.replication import ReplicationAdmin
from connector.replication.admin import managed_patterns
from connector.replication.drops import DropWatch, emit, standby_hint
from connector.replication.keyless import keyless_left_out
from connector.replication.lock_free import is_lock_timeout, lock_wait_bounded
from connector.replication.partitions import leaf_changes

from . import signals

log = logging.getLogger(__name__)

__all__ = ["TableWatcher"]

WATCH_INTERVAL_S = 2.0


class TableWatcher:
    def __init__(self, admin: ReplicationAdmin, publication: str, patterns: list[str],
                 slot: str, *, manage_publication: bool, keyless: str = "refuse",
                 all_tables_publication: bool = False, resync_partitions: bool = True,
                 detach_deletes: bool = False, drops: DropWatch | None = None,
                 record_drops: bool = True) -> None:
        """`drops`: the run's `DropWatch` (None: drops are not looked for); `record_drops`:
        False on a standby (it cannot write the message: a warning says what to run)."""
        self.admin = admin
        self.drops = drops
        self.record_drops = record_drops
        self.publication = publication
        self.slot = slot
        self.keyless = keyless
        managed = managed_patterns(patterns, all_tables=all_tables_publication)
        # `*`: a table list (every table), managed like a pattern's; FOR ALL TABLES only when
        # asked for (--all-tables-publication).
        self.patterns = managed if managed is not None else patterns
        self.manage = manage_publication and managed is not None
        self.fix_all_tables = manage_publication and managed is None
        self.left_out: set[TableName] = set()  # keyless tables left out, already logged
        self.refused: set[TableName] = set()  # left out for their table_settings, logged
        self.published = self._published()
        self.resync_partitions = resync_partitions
        self.detach_deletes = detach_deletes
        self.leaves = admin.partition_leaves(publication)  # root -> its leaf partitions
        # Left out at start (skip; refuse at a later start, `keyless_refused`): logged there.
        if self.manage and keyless != "full":
            self.left_out = self._keyless(self._unlisted(self.published))
        metrics.KEYLESS_LEFT_OUT.set(len(self.left_out))
        # The first session takes the drops' baseline now, not at its first check: a table
        # dropped within that first interval would otherwise never be found; a later session
        # records what was dropped while the stream reconnected.
        self._check_drops()
        self.next_check = time.monotonic() + WATCH_INTERVAL_S
        self.waited = False  # the last check gave up on a lock (said once: INFO, then DEBUG)

    def _published(self) -> set[TableName]:
        """The tables the publication publishes, pgcdc's signal table aside (FOR ALL TABLES
        publishes it; the producer drops its changes)."""
        return {TableName(s, t) for s, t, _, _ in self.admin.published_tables(self.publication)
                if TableName(s, t) != SIGNAL_TABLE}

    def _unlisted(self, published: set[TableName]) -> list[TableName]:
        """The tables matching the patterns that the publication does not name yet."""
        matching = [TableName(s, t) for s, t in self.admin.matching_tables(self.patterns)]
        known = published | {TableName(s, t) for s, t in self.admin.listed_tables(
            self.publication)}
        return [t for t in matching if t not in known and t != SIGNAL_TABLE]

    def _keyless(self, tables: list[TableName]) -> set[TableName]:
        return {TableName(s, t) for s, t in self.admin.keyless_tables(tables)} if tables \
            else set()

    def tick(self) -> None:
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + WATCH_INTERVAL_S
        try:
            with lock_wait_bounded(self.admin.conn):  # a migration's lock: next time
                self._check()
            self.waited = False
        except psycopg.Error as exc:
            if is_lock_timeout(exc):
                (log.debug if self.waited else log.info)(
                    "watching the catalog for new tables: %s (a lock another session holds, "
                    "a migration's?); the stream goes on, the check runs again in %gs",
                    first_line(exc), WATCH_INTERVAL_S)
                self.waited = True
                return
            if is_privilege_error(exc):  # a grant is missing: retrying cannot help
                raise signals.lacking_grant(exc, self.admin.role) from None
            raise SourceError(f"watching the catalog for new tables: "
                              f"{first_line(exc)}", transient=True) from None

    def _check(self) -> None:
        published = self._published()
        if self.manage and not self.admin.is_all_tables(self.publication):
            matching = [TableName(s, t) for s, t in self.admin.matching_tables(self.patterns)]
            matching = [t for t in matching if t != SIGNAL_TABLE]
            wanted = set(matching)
            # Listed: the tables the publication names (a partitioned table, not the
            # partitions pg_publication_tables shows in its place).
            listed = [TableName(s, t) for s, t in self.admin.listed_tables(self.publication)]
            gone = [t for t in listed if t not in wanted]
            if gone:  # renamed (or moved) out of the patterns: the publication follows them
                self.admin.drop_from_publication(self.publication, gone)
            known = published | set(listed)
            new = self._with_keys([t for t in matching if t not in known])
            if new:
                # An incremental snapshot needs a key: a table keyed by the whole row (REPLICA
                # IDENTITY FULL) joins without one (`_add`).
                whole_row = {TableName(s, t) for s, t in self.admin.full_identity_tables(new)}
                added = self._add(new, [t for t in new if t not in whole_row])
                for name in sorted(whole_row & added):
                    log.warning("new table %s has REPLICA IDENTITY FULL (no key): added to "
                                "publication %s without an incremental snapshot (which needs "
                                "a key), so rows written before now are not in its topic, only "
                                "changes from now on", name, self.publication)
            if gone or new:
                published = self._published()
        elif self.fix_all_tables and published - self.published:
            self._keyless_in_all_tables(sorted(published - self.published))
        self._check_partitions()
        for name in sorted(published - self.published):
            log.info("table %s is now published", name)
        for name in sorted(self.published - published):
            log.info("table %s is no longer published (dropped, renamed, or removed from "
                     "publication %s); its topic is kept", name, self.publication)
        self.published = published
        self._check_drops()

    def _check_drops(self) -> None:
        """Tables published at the previous check and dropped since: recorded in the WAL
        (``pgcdc.drop``), or, on a standby, a warning with the statement to run."""
        if self.drops is None:
            return
        dropped = self.drops.check(self.admin.conn)
        if not dropped:
            return
        if not self.record_drops:
            for drop in dropped:
                log.warning("table %s.%s (relation id %d) was dropped: this standby cannot "
                            "record it, so its lake table keeps its rows; run on the primary: "
                            "%s", drop.schema, drop.table, drop.relation_id, standby_hint(drop))
            self.drops.recorded()
            return
        emit(self.admin.conn, dropped)
        self.drops.recorded()
        for drop in dropped:
            log.info("table %s.%s (relation id %d) was dropped: recorded in the stream (the "
                     "merge job empties its lake table)", drop.schema, drop.table,
                     drop.relation_id)

    def _check_partitions(self) -> None:
        """Partitions attached to or detached from a published partitioned table since the
        last check (`leaf_changes`): an attached one holding rows is re-read by an incremental
        snapshot (PostgreSQL streams none of them), a detached one is a warning."""
        leaves = self.admin.partition_leaves(self.publication)
        attached, detached = leaf_changes(self.leaves, leaves)
        self.leaves = leaves
        for root, leaf in detached:
            if self.detach_deletes:
                log.info("partition %s left %s: detached, its keys were deleted from the topic "
                         "of %s at the DETACH (detach_deletes); dropped (DROP TABLE), its rows "
                         "stay there (docs/publishing.md, Partitioned tables)",
                         TableName(*leaf), TableName(*root), TableName(*root))
                continue
            log.warning("partition %s left %s (detached or dropped): PostgreSQL publishes no "
                        "delete for its rows, so they stay in the topic of %s (docs/"
                        "publishing.md, Partitioned tables)", TableName(*leaf), TableName(*root),
                        TableName(*root))
        filled = [TableName(*leaf) for _, leaf in attached if self.admin.has_rows(leaf)]
        if not filled:
            return
        names = ", ".join(map(str, filled))
        if not self.resync_partitions:
            log.warning("partition(s) %s attached: PostgreSQL streams none of the rows they "
                        "held; run on the primary: pgcdc snapshot --tables %s", names,
                        ",".join(map(str, filled)))
            return
        signals.ensure_table(self.admin.conn)
        signals.request(self.admin.conn, self.slot, filled,
                        message=f"partition attached: {names}")
        log.info("partition(s) %s attached: the rows they held follow as an incremental "
                 "snapshot", names)

    def _add(self, new: list[TableName], snapshot: list[TableName]) -> set[TableName]:
        """Add `new` to the publication and ask for the incremental snapshot of `snapshot`
        (those of them with a key) in one transaction, so a crash cannot leave a table
        streamed without its earlier rows. One dropped or renamed since it was listed is not
        added (`add_to_publication`): the next check sees what replaced it."""
        with self.admin.conn.transaction():
            added = {TableName(*t) for t in self.admin.add_to_publication(self.publication, new)}
            snapshot = [t for t in snapshot if t in added]
            if snapshot:
                signals.ensure_table(self.admin.conn)
                signals.request(self.admin.conn, self.slot, snapshot)
        if snapshot:
            log.info("new table(s) %s added to publication %s; their existing rows follow as "
                     "an incremental snapshot", ", ".join(map(str, snapshot)), self.publication)
        return added

    def _with_keys(self, new: list[TableName]) -> list[TableName]:
        """The new tables that may join the publication: keyless ones are left out (refuse,
        skip; logged once, counted in `pgcdc_keyless_tables_left_out`) or get REPLICA IDENTITY
        FULL first (full)."""
        keyless = self._keyless(new)
        if self.keyless == "full" and keyless:
            self.admin.apply_keyless_policy("full", sorted(keyless))
            keyless = set()
        for name in sorted(keyless - self.left_out):
            log.warning("new table %s", keyless_left_out(str(name), self.publication))
        # Only those still unpublished and keyless: one that got a key joins now, a dropped
        # one is gone.
        self.left_out = keyless
        metrics.KEYLESS_LEFT_OUT.set(len(keyless))
        return [t for t in new if t not in keyless and not self._refused(t)]

    def _refused(self, name: TableName) -> bool:
        """A new table whose table_settings PostgreSQL would refuse (a column list without its
        key, a filter outside its replica identity: published.py) stays out, logged once."""
        if not self.admin.table_settings:
            return False
        found = self.admin.setting_refusals(self.publication, [name])
        if found and name not in self.refused:
            log.warning("new table %s matches --tables but is left out of publication %s: %s",
                        name, self.publication, found[0])
        if found:
            self.refused.add(name)
        else:
            self.refused.discard(name)
        return bool(found)

    def _keyless_in_all_tables(self, tables: list[TableName]) -> None:
        """New tables FOR ALL TABLES published: set REPLICA IDENTITY FULL on keyless ones
        (full), or say how to fix them."""
        keyless = self.admin.keyless_tables(tables)
        if not keyless:
            return
        if self.keyless == "full":
            self.admin.apply_keyless_policy("full", keyless)
            return
        for schema, table in keyless:
            log.warning("new table %s.%s has no primary key and is published FOR ALL TABLES: "
                        "PostgreSQL rejects UPDATE and DELETE on it until it has one (or "
                        "ALTER TABLE ... REPLICA IDENTITY FULL; --keyless-tables full does it)",
                        schema, table)
