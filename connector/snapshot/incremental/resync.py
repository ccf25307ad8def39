"""Re-sync after DDL: a table whose existing rows a DDL statement changed is re-read through an
incremental snapshot, so consumers converge (``resync_on_ddl``, on by default).

Which DDL, and why no row event tells a consumer: `rewrites`. The producer notices it three
ways, all between reads of the stream (nothing here blocks it; the stream loop calls both
`relation` and `tick`, so what they share needs no lock; a snapshot's reads are reported on the
same thread):

* the catalog (`catalog`): every `CHECK_INTERVAL_S` one query reads a digest per published
  table (the versions of its catalog rows) and, for the tables whose digest changed, their
  columns (type, typmod, generated, whether a new column has values for existing rows, enum
  labels); `rewrites.Settle` compares those with the last check. pgoutput sends nothing for
  DDL alone (not even a Relation: it sends one only before the table's next change), so this
  is what catches an ``ALTER TABLE`` with no writes after it;
* the stream: a Relation message that differs from the last one of its table (a column's type
  or typmod changed; a column added, whose catalog row is checked at once). This catches DDL
  the catalog check missed, e.g. made while the producer was down between two writes it
  replays. Relations inside a streamed (not yet committed) transaction are left to the
  catalog check;
* what was published against the catalog (`rewrites.published_reasons`): a check that first
  sees a table has no "before" of its own, and a table created, filled and altered within a
  second or two (a migration, published from its creation by FOR ALL TABLES, a schema or a
  managed publication) is first seen after its DDL. So the columns its rows went out with --
  its first Relation of the run, or a snapshot's read of it (the initial snapshot, an
  incremental chunk) -- wait in `unchecked` for the next check, which compares them with the
  catalog it reads *after* receiving them (the catalog is the newer side: no false alarm from
  a check that ran before the stream got there). A difference joins `Settle`'s gathered
  reasons, so it is queued once the table holds still, under the dedup rules below. A table
  never published (no Relation, no snapshot) needs nothing and gets nothing. A table created
  inside a streamed transaction is remembered from that transaction's Relation (the
  catalog did not show it: it is new) until a check sees it committed.

  The races: the stream lags the catalog, so the Relation of the rows written after the DDL
  may still be coming. The rows written before it went out with the old values either way, so
  the re-sync is needed, unless every one of them is rewritten later (then it was wasted, not
  wrong); the Relation that comes later matches `by_catalog` and queues nothing more. A
  restart replaying a write from before a DDL the previous run already re-synced re-syncs
  again: also needed, since the replay re-publishes the old values after the first re-sync.

Either queues one request in the signal table (`signals`, the request `pgcdc snapshot` makes),
its message naming the DDL, so ``pgcdc status`` shows why it runs; one INFO line says the same.
A burst of DDL on a table queues one re-sync: the catalog check waits until the table held
still for one check, and no request is added while one for the table is still pending or
was made for the same column description. The re-sync is an ordinary incremental snapshot:
chunked by key, watermarked, while streaming goes on (its correctness argument:
`window`); its rows are read after the DDL committed, so they carry the new values.

Still undetectable (docs/snapshots.md "Re-sync after DDL", Limits): DDL whose effect on values
leaves the published columns and the catalog alike (a ``USING`` conversion to the same type); ``DROP
EXPRESSION`` on the table's last column when the check's first look is after it (it reads as ``ADD
COLUMN`` without a default: only its position, before a published column, tells it apart); and DDL
made while the producer was down on a table whose stream replays no write from before it (the first
description the run sees, Relation or catalog, is already the new one). ``ALTER DOMAIN`` changes no
stored value (a constraint only validates, a default applies to new rows), so it needs no re-sync.

With ``resync_on_ddl: false`` the same checks run and log a WARNING naming the table and the
DDL (the consumers keep the old values until ``pgcdc snapshot --tables <table>``), and
nothing is queued. A signal table the role may not create or write is a warning too: the
stream goes on, the re-sync does not happen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import psycopg

from connector import metrics
from connector.errors import PrivilegeError, SourceError, first_line, is_privilege_error
from connector.names import TableName
from connector.pgoutput.messages import Relation
from connector.replication.features import ServerFeatures

from . import signals
from .catalog import Conn, catalog_columns, catalog_digests
from .rewrites import Column, Settle, published_reasons, signature
from .stores import RequestStore, TableRequests

__all__ = ["CHECK_INTERVAL_S", "RESYNC_MESSAGE", "DdlResync"]

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 2.0
RELATION_DEDUP_S = 30.0  # a Relation's re-sync covers the catalog check's this long
MAX_UNCOMMITTED = 10_000  # tables created in streamed transactions, awaiting their commit
RESYNC_MESSAGE = "re-sync after DDL: "  # the signal table's message of such a request


class DdlResync:
    def __init__(self, conn: Conn, publication: str, slot: str, features: ServerFeatures, *,
                 enabled: bool) -> None:
        self.conn = conn
        self.publication = publication
        self.slot = slot
        self.features = features
        self.enabled = enabled
        # Why re-syncs are off, in the warning (the pipeline says "the server is a standby").
        self.off_because = "resync_on_ddl is off"
        # Where a re-sync is queued: None, the signal table on `conn`; the signal topic on a
        # standby (`channel.choose_channel`).
        self.store: RequestStore | None = None
        self.settle = Settle()
        self.relations: dict[int, Relation] = {}  # the last Relation per id, from the stream
        # What was published of a table and not yet compared with its catalog: the columns of
        # its first Relation of the run, or of a snapshot's read (the earliest since the last
        # check). The next check compares them with the catalog it reads after.
        self.unchecked: dict[int, tuple[Column, ...]] = {}
        # Of those, the tables first published inside a streamed transaction while the catalog
        # did not show them (created in it): compared once a check sees them (it committed),
        # kept until then (it may still run; an aborted one's stay, at most MAX_UNCOMMITTED).
        self.uncommitted: dict[int, None] = {}
        self.checked = False  # a check has read the catalog (`digests` is meaningful)
        # The published columns' (name, type, typmod) a re-sync was queued for, per table, by
        # the catalog check: the Relation showing the same DDL later (before the table's next
        # write, however late) queues nothing.
        self.by_catalog: dict[int, tuple[tuple[str, int, int], ...]] = {}
        # ... and by a Relation (with the time): the catalog check seeing the same DDL a few
        # seconds later queues nothing.
        self.by_relation: dict[int, tuple[tuple[tuple[str, int, int], ...], float]] = {}
        self.next_check = time.monotonic()
        self.digests: dict[int, str] = {}  # per table, at the last check
        self.enums = ""  # of pg_enum, at the last check
        self.names: dict[int, TableName] = {}  # per table, at the last fetch

    # ------------------------------------------------------------------ catalog side

    def tick(self) -> None:
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + CHECK_INTERVAL_S
        try:
            digests, enums = catalog_digests(self.conn, self.publication, self.features)
            changed = [oid for oid, digest in digests.items() if self.digests.get(oid) != digest
                       or enums != self.enums]  # an enum renamed: every table, once
            fetched = catalog_columns(self.conn, self.publication, self.features, changed) \
                if changed else {}
        except psycopg.OperationalError as exc:  # the connection: the session reconnects
            raise SourceError(f"checking the catalog for DDL: {first_line(exc)}",
                              transient=True) from None
        except psycopg.Error as exc:  # retried at the next check; the stream goes on
            log.warning("re-sync after DDL: cannot read the catalog: %s", first_line(exc))
            return
        self.settle.forget(digests)
        self.checked = True
        self.enums = enums
        self.digests = {oid: digest for oid, digest in digests.items()
                        if oid in fetched or oid not in changed}  # (dropped meanwhile: again)
        for oid, (name, _) in fetched.items():
            self.names[oid] = name
        self._check_published(digests, fetched)
        # The tables whose columns changed, and those that changed at an earlier check or
        # whose published columns differ from their catalog (they settle once a check sees
        # them unchanged).
        observe = {oid: columns for oid, (_, columns) in fetched.items()}
        observe.update((oid, list(self.settle.seen[oid])) for oid in self.settle.waiting
                       if oid in digests and oid not in fetched)
        for oid, columns in observe.items():
            found = self.settle.observe(oid, columns)
            if not found:
                continue
            name = self.names[oid]
            shown = signature(columns)
            seen = self.by_relation.pop(oid, None)
            if seen is not None and seen[0] == shown and now - seen[1] < RELATION_DEDUP_S:
                continue  # the Relation of the table's next write queued it already
            try:
                queued = self._resync(name, found)
            except SourceError:
                self.settle.waiting[oid] = list(found)  # again at the next check
                raise
            if queued:
                self.by_catalog[oid] = shown

    def _check_published(self, digests: dict[int, str],
                         fetched: dict[int, tuple[TableName, list[Column]]]) -> None:
        """Compare what was published of each table (`unchecked`) with its catalog as this
        check read it (after the publication: the catalog is the newer side). A difference
        joins the table's gathered reasons; `Settle` queues them once it holds still, so the
        dedup rules of a catalog-found change apply (`by_relation`, then `by_catalog`)."""
        for oid in list(self.unchecked):
            if oid not in digests:
                if oid not in self.uncommitted:  # dropped, or no longer published
                    del self.unchecked[oid]
                continue  # (created in a streamed transaction not committed yet)
            self.uncommitted.pop(oid, None)
            current = fetched[oid][1] if oid in fetched else self.settle.seen.get(oid)
            if current is None:
                continue  # not read yet (a failed fetch): at the next check
            published = self.unchecked.pop(oid)
            if not published_reasons(published, current):
                continue
            texts = self._type_texts({(c.type_oid, c.typmod) for c in published})
            found = published_reasons(
                [c._replace(type_text=texts.get((c.type_oid, c.typmod), "")) for c in published],
                current)
            gathered = self.settle.waiting.setdefault(oid, [])
            gathered.extend(r for r in found if r not in gathered)

    def published(self, relation: Relation) -> None:
        """A snapshot read `relation`'s rows as it describes them (on the stream thread: the
        incremental snapshots run between reads, as this does)."""
        self.unchecked.setdefault(relation.relation_id, _columns(relation))

    # ------------------------------------------------------------------ stream side

    def relation(self, msg: Relation) -> None:
        """A Relation from the stream: compare it with its table's previous one. One inside a
        streamed transaction (xid set) is not compared: that transaction may not have
        committed (a re-sync now would read the old rows) or may abort; the catalog check sees
        its DDL once it commits. Only a table the catalog did not show at the last check
        (created in that transaction) is remembered, for the check that first sees it."""
        if msg.xid is not None:
            oid = msg.relation_id
            if self.checked and oid not in self.digests and oid not in self.unchecked:
                if len(self.uncommitted) >= MAX_UNCOMMITTED:  # aborted ones, surely
                    old = next(iter(self.uncommitted))
                    del self.uncommitted[old]
                    self.unchecked.pop(old, None)
                self.uncommitted[oid] = None
                self.unchecked[oid] = _columns(msg)
            return
        before = self.relations.get(msg.relation_id)
        self.relations[msg.relation_id] = msg
        if before is None:  # its rows went out with these columns: compare with the catalog
            self.unchecked.setdefault(msg.relation_id, _columns(msg))
        try:
            self._compare(before, msg)
        except SourceError:  # the replayed stream sends this Relation again: compare it then
            if before is not None:
                self.relations[msg.relation_id] = before
            raise

    def _compare(self, before: Relation | None, msg: Relation) -> None:
        shown = tuple((c.name, c.type_oid, c.type_modifier) for c in msg.columns)
        if before is None or shown == tuple((c.name, c.type_oid, c.type_modifier)
                                            for c in before.columns):
            return  # first seen, or only the key flags changed
        if self.by_catalog.pop(msg.relation_id, None) == shown:
            return  # the catalog check already queued this one
        texts = self._type_texts({(c.type_oid, c.type_modifier)
                                  for c in (*before.columns, *msg.columns)})
        old = [Column(0, c.name, c.type_oid, c.type_modifier,
                      type_text=texts.get((c.type_oid, c.type_modifier), ""))
               for c in before.columns]
        new = [Column(0, c.name, c.type_oid, c.type_modifier,
                      type_text=texts.get((c.type_oid, c.type_modifier), ""))
               for c in msg.columns]
        known = {c.name for c in before.columns}
        if any(c.name not in known for c in msg.columns):  # added: values for existing rows?
            try:
                current = catalog_columns(self.conn, self.publication, self.features,
                                          [msg.relation_id]).get(msg.relation_id)
            except psycopg.OperationalError as exc:
                raise SourceError(f"checking the catalog for DDL: {first_line(exc)}",
                                  transient=True) from None
            except psycopg.Error as exc:
                log.warning("re-sync after DDL: cannot read the catalog of %s.%s: %s",
                            msg.namespace, msg.name, first_line(exc))
                current = None
            fills = {c.name for c in current[1] if c.fills_existing} if current else set()
            new = [c._replace(fills_existing=c.name not in known and c.name in fills)
                   for c in new]
        found = published_reasons(old, new)
        if found and self._resync(TableName(msg.namespace, msg.name), found):
            self.by_relation[msg.relation_id] = (shown, time.monotonic())

    def _type_texts(self, types: set[tuple[int, int]]) -> dict[tuple[int, int], str]:
        """format_type() of (type OID, typmod) pairs, for the log and status ({} on error)."""
        pairs = sorted(types)
        try:
            rows = self.conn.execute(
                "SELECT u.o::int8, u.m, pg_catalog.format_type(u.o, u.m) "
                "FROM unnest(%s::oid[], %s::int4[]) AS u(o, m)",
                ([p[0] for p in pairs], [p[1] for p in pairs])).fetchall()
        except psycopg.Error:
            return {}  # the message shows OIDs instead
        return {(int(o), int(m)): str(text) for o, m, text in rows}

    # ------------------------------------------------------------------ the request

    def _resync(self, name: TableName, found: Sequence[str]) -> bool:
        """Queue a re-sync of `name` (unless one is pending); whether it is queued."""
        why = "; ".join(found)
        if not self.enabled:
            log.warning("table %s: %s changed existing rows without row events; "
                        "%s, so consumers keep the old values (re-publish "
                        "them with: pgcdc snapshot --tables %s)", name, why, self.off_because,
                        name)
            return True
        try:
            store = self.store or TableRequests(lambda: self.conn)
            if store.channel == "table":
                signals.ensure_table(self.conn)
            if store.pending_includes(self.slot, name):
                log.info("re-sync of %s after DDL (%s): one is queued already", name, why)
                return True
            request = store.request(self.slot, [name], message=RESYNC_MESSAGE + why)
        except psycopg.OperationalError as exc:  # the connection: the session reconnects
            raise SourceError(f"queueing a re-sync of {name} after DDL: {first_line(exc)}",
                              transient=True) from None
        except (psycopg.Error, PrivilegeError) as exc:
            if isinstance(exc, PrivilegeError) or is_privilege_error(exc):
                error = exc if isinstance(exc, PrivilegeError) else \
                    signals.lacking_grant(exc, self.conn.info.user)
                log.warning("re-sync of %s after DDL (%s) not queued: %s", name, why, error)
            else:
                log.warning("re-sync of %s after DDL (%s) not queued: %s", name, why,
                            first_line(exc))
            return False
        log.info("re-sync of %s queued (incremental snapshot %d) after DDL: %s", name,
                 request, why)
        metrics.DDL_RESYNCS.labels(str(name)).inc()
        return True


def _columns(relation: Relation) -> tuple[Column, ...]:
    """A Relation's columns as `Column`s (no attnum: matched by name and order)."""
    return tuple(Column(0, c.name, c.type_oid, c.type_modifier) for c in relation.columns)
