"""Slot and publication administration over a regular SQL connection.

Checks what must hold before streaming (wal_level, the slot's plugin and WAL status) and
creates the slot and publication when asked. Identifiers are always quoted by psycopg's `sql`.
The slot's own functions are in slots.py, the policy for tables without a key in keyless.py;
`ReplicationAdmin` calls them for its callers.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Sequence

import psycopg
from psycopg import sql

from connector.errors import (
    CatalogChanged,
    ConfigError,
    SourceError,
    connection_gone,
    first_line,
    is_privilege_error,
    is_vanished,
)

from . import keyless as keyless_policy  # not `keyless`: ensure_publication's argument
from . import slots
from .features import ServerFeatures
from .lock_free import published_tables_sql
from .partitions import VIA_ROOT_DEFAULT, via_root_change
from .privileges import connect_refusal, dsn_role, lacking
from .published import (
    TableSetting,
    normalized_filter,
    refusals,
    sets_publication,
    setting_for,
    table_entry,
    user_publication_refusals,
    with_exclusions,
)
from .slots import SlotInfo
from .standby import publication_refusal

log = logging.getLogger(__name__)


def list_changes(current: Sequence[tuple[str, str]], published: Sequence[tuple[str, str]],
                 wanted: Sequence[tuple[str, str]]
                 ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(gone, new) of a table list: the tables `current` names (the publication's own list)
    that are not `wanted`, and the `wanted` ones it neither names nor publishes (a partition
    is published through its listed parent), in `wanted` order."""
    names = set(current)
    known = names | set(published)
    return ([t for t in current if t not in set(wanted)],
            [t for t in wanted if t not in known])


def managed_patterns(patterns: Sequence[str], *, all_tables: bool) -> list[str] | None:
    """The patterns of the table list pgcdc keeps for --tables `patterns`, or None for a FOR
    ALL TABLES publication: only ``*`` with the explicit `all_tables` setting gives that.
    ``*`` alone is otherwise every table of every schema (``*.*``), listed and kept up to date
    like any pattern's, so a table joins only once --keyless-tables allows it."""
    if list(patterns) == ["*"]:
        return None if all_tables else ["*.*"]
    return list(patterns)


# Times an ALTER PUBLICATION naming tables runs when the application drops or renames them
# meanwhile (`ReplicationAdmin._alter_publication`).
ALTER_ATTEMPTS = 3


def _table_list(tables: Sequence[tuple[str, str]]) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(*t) for t in tables)


class ReplicationAdmin:
    """SQL-side view of the source: server facts, the slot, the publication, tables."""

    def __init__(self, conn: psycopg.Connection[tuple]) -> None:  # type: ignore[type-arg]
        self.conn = conn
        # What the publication pgcdc creates or extends publishes of each table (published.py;
        # `table_settings`), and whether it publishes stored generated columns (PostgreSQL 18;
        # None: left as it is).
        self.table_settings: list[TableSetting] = []
        self.generated_columns: bool | None = None
        # publish_via_partition_root (partitions.py; None: a new publication gets the default,
        # an existing one is left as it is), and whether `ensure_publication` changed it on an
        # existing publication (the caller re-reads the partitioned tables).
        self.via_root: bool | None = None
        self.via_root_switched = False
        # Tables of an existing publication whose column list or filter `ensure_publication`
        # changed: rows that entered it were never streamed (the caller re-syncs them).
        self.resettled: list[tuple[str, str]] = []

    @classmethod
    def connect(cls, dsn: str) -> ReplicationAdmin:
        try:
            conn = psycopg.connect(dsn, autocommit=True, application_name="pgcdc-admin")
        except psycopg.OperationalError as exc:
            refused = connect_refusal(str(exc), dsn_role(dsn))
            if refused is not None:
                raise refused from None
            raise SourceError(f"cannot connect to PostgreSQL: {first_line(exc)}",
                              transient=True) from None
        return cls(conn)

    @property
    def role(self) -> str:
        """The role pgcdc is connected as (named in privilege errors)."""
        return self.conn.info.user

    def close(self) -> None:
        self.conn.close()

    def _one(self, query: str | sql.SQL | sql.Composed, params: Sequence[object] = ()) -> tuple:  # type: ignore[type-arg]
        row = self.conn.execute(query, params).fetchone()
        assert row is not None
        return row

    def in_recovery(self) -> bool:
        """Whether the server is a standby now (read each time: a promotion changes it)."""
        return bool(self._one("SELECT pg_is_in_recovery()")[0])

    @property
    def server_version_num(self) -> int:
        return int(self._one("SHOW server_version_num")[0])

    @property
    def features(self) -> ServerFeatures:
        return ServerFeatures(self.server_version_num)

    def check_wal_level(self) -> None:
        level = self._one("SHOW wal_level")[0]
        if level != "logical":
            raise SourceError(
                f"wal_level is {level!r}; logical replication needs wal_level = logical in "
                "postgresql.conf (then restart PostgreSQL)"
            )

    def slot(self, name: str) -> SlotInfo | None:
        return slots.read_slot(self.conn, name)

    def check_slot(self, info: SlotInfo) -> None:
        slots.check_slot(self.conn, info)

    def create_slot(self, name: str) -> SlotInfo:
        return slots.create_slot(self.conn, name, role=self.role, standby=self.in_recovery())

    def drop_slot(self, name: str) -> None:
        slots.drop_slot(self.conn, name)

    def drop_publication(self, name: str) -> None:
        self.conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(name)))

    def publication_exists(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                                 (name,)).fetchone() is not None

    def resolve_tables(self, patterns: Sequence[str]) -> list[tuple[str, str]]:
        """`schema.table` patterns (`*` and `?` allowed; no schema means `public`) → tables;
        a pattern matching nothing is an error."""
        return self.matching_tables(patterns, require_each=True)

    def matching_tables(self, patterns: Sequence[str], *,
                        require_each: bool = False) -> list[tuple[str, str]]:
        """The tables `patterns` match now, in pattern order. Unlogged tables have no changes
        to decode and PostgreSQL refuses them in a publication (FOR ALL TABLES skips them):
        never matched. A partition whose partitioned root is matched too is left out: the root
        publishes it (through the root or leaf by leaf), and one detached later is a table of
        its own, which the table watcher then adds like any new table."""
        rows = self.conn.execute(
            "SELECT n.nspname::text, c.relname::text, rn.nspname::text, r.relname::text"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_class r ON c.relispartition AND r.oid = pg_partition_root(c.oid)"
            " LEFT JOIN pg_namespace rn ON rn.oid = r.relnamespace"
            " WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p'"
            " AND n.nspname <> 'information_schema'"
            " AND n.nspname NOT LIKE 'pg\\_%%' ORDER BY 1, 2"
        ).fetchall()
        tables = [(r[0], r[1]) for r in rows]
        roots = {(r[0], r[1]): (r[2], r[3]) for r in rows if r[3] is not None}
        chosen: list[tuple[str, str]] = []
        for pattern in patterns:
            schema_pat, _, table_pat = pattern.rpartition(".")
            schema_pat = schema_pat or "public"
            matches = [t for t in tables if fnmatch.fnmatchcase(t[0], schema_pat)
                       and fnmatch.fnmatchcase(t[1], table_pat)]
            if not matches and require_each:
                raise ConfigError(f"--tables pattern {pattern!r} matches no table")
            chosen.extend(m for m in matches if m not in chosen)
        matched = set(chosen)
        return [t for t in chosen if roots.get(t) not in matched]

    def listed_tables(self, publication: str) -> list[tuple[str, str]]:
        """The tables named in `publication` itself (not the partitions they publish)."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT n.nspname::text, c.relname::text FROM pg_publication_rel pr"
            " JOIN pg_publication p ON p.oid = pr.prpubid"
            " JOIN pg_class c ON c.oid = pr.prrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE p.pubname = %s ORDER BY 1, 2", (publication,)).fetchall()]

    def add_to_publication(self, name: str, tables: Sequence[tuple[str, str]]
                           ) -> list[tuple[str, str]]:
        """Add `tables` to publication `name`; those added (`_alter_publication`)."""
        return self._alter_publication(name, "ADD", tables)

    def drop_from_publication(self, name: str, tables: Sequence[tuple[str, str]]
                              ) -> list[tuple[str, str]]:
        """Remove `tables` from publication `name`; those removed (`_alter_publication`)."""
        return self._alter_publication(name, "DROP", tables)

    def _entries(self, tables: Sequence[tuple[str, str]]) -> sql.Composed:
        """A publication's table list: each table with its column list and row filter."""
        return sql.SQL(", ").join(
            table_entry(s, t, self._setting(s, t)) for s, t in tables)

    def _setting(self, schema: str, table: str) -> TableSetting | None:
        """The table's setting, its excluded columns (masks) out of its column list."""
        setting = setting_for(self.table_settings, schema, table)
        if setting is None or not setting.excluded:
            return setting
        columns = [r[0] for r in self.conn.execute(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attnum > 0 AND NOT attisdropped AND (attgenerated = '' OR %s)"
            " ORDER BY attnum",  # generated columns: only where published anyway
            (sql.Identifier(schema, table).as_string(self.conn),
             bool(self.generated_columns))).fetchall()]
        return with_exclusions(setting, columns)

    def _alter_publication(self, name: str, action: str, tables: Sequence[tuple[str, str]]
                           ) -> list[tuple[str, str]]:
        """ALTER PUBLICATION `name` ADD or DROP `tables`, in a transaction of its own or a
        savepoint of the caller's; the tables it altered. The statement names tables listed
        a moment ago: one the application dropped or renamed since (or that left the
        publication, for DROP) fails it, so it runs again without those, at most
        `ALTER_ATTEMPTS` times (a name may come back meanwhile: then nothing is altered);
        one INFO line says which. The next check sees what replaced them."""
        tables = list(tables)
        vanished: list[tuple[str, str]] = []
        done: list[tuple[str, str]] = []
        detail = ""
        for _ in range(ALTER_ATTEMPTS):
            if not tables:
                break
            if action == "ADD" and self.table_settings:
                refused = self.setting_refusals(name, tables)
                if refused:  # a table the watcher found: PostgreSQL would reject its UPDATEs
                    raise ConfigError(refused[0])
            statement = sql.SQL("ALTER PUBLICATION {} {} TABLE {}").format(
                sql.Identifier(name), sql.SQL(action),
                self._entries(tables) if action == "ADD" else _table_list(tables))
            try:
                with self.conn.transaction():
                    self.conn.execute(statement)
                done = tables
                break
            except psycopg.Error as exc:
                if is_privilege_error(exc):
                    raise lacking(exc, self.role, owner_sql=statement.as_string(self.conn)) \
                        from None
                if not is_vanished(exc):
                    raise
                detail = first_line(exc)
                listed = set(self.listed_tables(name))
                still = [t for t in tables if (t in listed) == (action == "DROP")]
                if action == "ADD":
                    still = [t for t in still if self.resolves(t)]
                vanished += [t for t in tables if t not in still and t not in vanished]
                tables = still
        gone = vanished + ([t for t in tables if t not in vanished] if not done else [])
        if gone:
            log.info("publication %s: %s dropped or renamed meanwhile (%s): the next check "
                     "sees what replaced them", name, ", ".join(f"{s}.{t}" for s, t in gone),
                     detail)
        return done

    def resolves(self, table: tuple[str, str]) -> bool:
        """Whether the qualified name `table` names a relation now."""
        return self._one("SELECT to_regclass(%s) IS NOT NULL",
                         (sql.Identifier(*table).as_string(self.conn),))[0] is True

    def ensure_publication(self, name: str, patterns: Sequence[str], *,
                           keyless: str | None = None,
                           exclude: Sequence[tuple[str, str]] = (),
                           all_tables: bool = False, add_later: bool = False) -> bool:
        """Create the publication (or set its tables) for `patterns`. `*` alone: the list of
        every table (`managed_patterns`; the table watcher keeps it up to date), or with
        `all_tables` FOR ALL TABLES. `keyless` is the policy for tables without a key
        (`apply_keyless_policy`; None: none, publish them as they are); `exclude`: tables the
        list must not bring in (pgcdc's own signal table). A publication of the other kind
        (FOR ALL TABLES where a list is wanted, or the reverse) is re-created as wanted
        (`_recreate_publication`). `add_later` (the slot exists and streaming resumes): an
        existing list only loses the tables no longer matching; those missing from it (created
        while pgcdc was stopped) are left to the table watcher, which adds each with an
        incremental snapshot: added here, their rows written before would never be streamed
        (pgoutput publishes a change only if its table was in the publication at its commit).
        True if it was created now."""
        wanted = managed_patterns(patterns, all_tables=all_tables)
        listed: list[tuple[str, str]] | None = None
        if wanted is None:
            if keyless == "skip":
                raise ConfigError("a FOR ALL TABLES publication cannot leave tables without a "
                                  "key out: use --keyless-tables full, or a table list")
        else:
            found = self.matching_tables(wanted) if wanted == ["*.*"] \
                else self.resolve_tables(wanted)
            listed = [t for t in found if t not in exclude]
        exists = self.publication_exists(name)
        self.check_publish_settings(name, listed, exists=exists)
        if keyless is not None:
            # A later start: the publication exists and stays of its kind
            # (`keyless.keyless_refused`).
            later = exists and (listed is not None or self.is_all_tables(name))
            left_out = self.apply_keyless_policy(keyless, listed, publication=name,
                                                 patterns=patterns if later else None)
            if listed is not None:
                listed = [t for t in listed if t not in left_out]
        if exists and self.is_all_tables(name) != (listed is None):
            self._recreate_publication(name, listed)
            return False
        statements: list[sql.Composed] = []
        statement: sql.Composed | None = None
        self.resettled = []
        if not exists:
            target = sql.SQL("FOR ALL TABLES") if listed is None else sql.SQL("") \
                if not listed else sql.SQL("FOR TABLE {}").format(self._entries(listed))
            statement = sql.SQL("CREATE PUBLICATION {} {}{}").format(
                sql.Identifier(name), target, self._with_options())
        elif listed is not None:
            current = self.listed_tables(name)
            # Already the list (a publication the tables' owner made): nothing to change, so
            # a role that owns neither it nor the tables can use it.
            if sorted(current) != sorted(listed) and add_later:
                published = [(t[0], t[1]) for t in self.published_tables(name)]
                gone, new = list_changes(current, published, listed)
                if gone:
                    statement = sql.SQL("ALTER PUBLICATION {} DROP TABLE {}").format(
                        sql.Identifier(name), _table_list(gone))
                if new:
                    log.info("table(s) created while pgcdc was stopped join publication %s at "
                             "the table watcher's first check, with an incremental snapshot of "
                             "their rows: %s", name, ", ".join(f"{s}.{t}" for s, t in new))
            elif sorted(current) != sorted(listed):
                if listed:
                    statement = sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(
                        sql.Identifier(name), self._entries(listed))
                else:  # SET TABLE needs one table at least
                    statement = sql.SQL("ALTER PUBLICATION {} DROP TABLE {}").format(
                        sql.Identifier(name), _table_list(current))
            if statement is None or add_later:  # the tables kept: their settings as wanted
                statements += self._resettle(name, [t for t in current if t in listed])
        if exists:
            statements += self._set_generated(name) + self._set_via_root(name)
        if statement is not None:
            statements.insert(0, statement)
        if not statements:
            return False
        self._publication_ddl(name, statements, "create" if not exists else "set the tables of")
        if self.resettled:
            log.warning("publication %s: the column list or row filter of %s changed as "
                        "table_settings say", name,
                        ", ".join(f"{s}.{t}" for s, t in self.resettled))
        if not exists:
            log.info("created publication %s", name)
        return not exists

    def _publication_ddl(self, name: str, statements: Sequence[sql.Composed], doing: str) -> None:
        """Run `statements` in one transaction; a failure is one line naming the fix (a table
        dropped or renamed since it was listed: `CatalogChanged`, nothing done; list again).
        On a standby (no DDL) nothing runs: the line names the statements to run on the
        primary."""
        if self.in_recovery():
            doing = {"create": "does not exist",
                     "set the tables of": "does not list the tables of --tables",
                     "re-create": "is not of the kind --tables asks for (a table list or FOR "
                                  "ALL TABLES)"}.get(doing, f"needs a change ({doing})")
            raise ConfigError(publication_refusal(
                name, doing, [s.as_string(self.conn) for s in statements]))
        statement = statements[0]
        try:
            with self.conn.transaction():
                for statement in statements:
                    self.conn.execute(statement)
        except psycopg.Error as exc:
            if is_privilege_error(exc):
                raise lacking(exc, self.role, owner_sql=statement.as_string(self.conn)) \
                    from None
            detail = first_line(exc)
            if is_vanished(exc):  # a table listed a moment ago was dropped or renamed since
                raise CatalogChanged(f"cannot {doing} publication {name!r}: {detail}") \
                    from None
            raise SourceError(f"cannot {doing} publication {name!r}: {detail}",
                              transient=connection_gone(detail)) from None

    def _recreate_publication(self, name: str, listed: list[tuple[str, str]] | None) -> None:
        """Turn publication `name` into FOR ALL TABLES (`listed` None) or into the list
        `listed`. PostgreSQL cannot ALTER one kind into the other, so it is dropped and created
        again, in one transaction: pgoutput reads the publication as of each change's commit,
        so every change committed before it is decoded with the old table set and every later
        one with the new, with no moment where the publication is missing (a walsender meeting
        one stops). Every table of both sets stays published throughout; the keyless tables a
        list leaves out stop being published, as the policy says. Its publish options are kept.
        Only a role owning the publication (or a member of its owner) may do this; for any
        other, a `ConfigError` says what to do."""
        was = "a table list" if listed is None else "FOR ALL TABLES"
        owned, insert, update, delete, truncate, via_root = self._one(
            "SELECT pg_has_role(pubowner, 'USAGE'), pubinsert, pubupdate, pubdelete,"
            " pubtruncate, pubviaroot FROM pg_publication WHERE pubname = %s", (name,))
        wanted = "FOR ALL TABLES (--all-tables-publication)" if listed is None else \
            "the table list pgcdc keeps for --tables"
        if not owned and not self.in_recovery():  # a standby: the statements, below
            raise ConfigError(
                f"publication {name!r} is {was} and pgcdc should make it {wanted}, but role "
                f"{self.role!r} does not own it: have its owner drop it (pgcdc then creates it), "
                "or run with a new --publication and --slot"
                + ("" if listed is None else ", or with --all-tables-publication to keep it"))
        if self.via_root is not None:
            via_root = self.via_root
        publish = ", ".join(op for op, on in (("insert", insert), ("update", update),
                                              ("delete", delete), ("truncate", truncate)) if on)
        target = sql.SQL("FOR ALL TABLES") if listed is None else sql.SQL("") if not listed \
            else sql.SQL("FOR TABLE {}").format(self._entries(listed))
        generated: sql.Composable = sql.SQL("")
        if self.features.publishes_generated_columns:
            stored = self.generated_columns if self.generated_columns is not None else \
                self._one("SELECT pubgencols = 's' FROM pg_publication WHERE pubname = %s",
                          (name,))[0]
            generated = sql.SQL(", publish_generated_columns = {}").format(
                sql.SQL("stored" if stored else "none"))
        self._publication_ddl(name, [
            sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(name)),
            sql.SQL("CREATE PUBLICATION {} {} WITH (publish = {}, publish_via_partition_root = {}"
                    "{})").format(sql.Identifier(name), target, sql.Literal(publish),
                                  sql.Literal(bool(via_root)), generated)], "re-create")
        log.warning("publication %s was %s: re-created as %s, in one transaction (every table "
                    "of both stays published)", name, was, wanted)

    # ------------------------------------------------------------ what is published

    def check_publish_settings(self, name: str, listed: Sequence[tuple[str, str]] | None, *,
                               exists: bool) -> None:
        """Refuse, in one line and before anything is created, the settings PostgreSQL would
        refuse (published.py): on a server too old for them, a column list without the key,
        a filter outside the replica identity. A pattern matching no table yet is a warning."""
        features = self.features
        if sets_publication(self.table_settings) and not features.publication_column_lists:
            raise ConfigError(f"table_settings (column lists, row filters) need PostgreSQL "
                              f"15+, the server is {features.major}")
        if self.generated_columns and not features.publishes_generated_columns:
            raise ConfigError(f"publish_generated_columns needs PostgreSQL 18+, the server is "
                              f"{features.major}")
        if not self.table_settings or listed is None:
            return
        unused = [s.pattern for s in self.table_settings
                  if not any(setting_for([s], *t) for t in listed)]
        if unused:  # a table created later may match it: the table watcher applies it then
            log.warning("table_settings pattern(s) %s match no table of the publication "
                        "(--tables) yet", ", ".join(map(repr, unused)))
        refused = self.setting_refusals(name if exists else None, listed)
        if refused:
            more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
            raise ConfigError(refused[0] + more)

    def setting_refusals(self, publication: str | None, tables: Sequence[tuple[str, str]]
                         ) -> list[str]:
        """`published.refusals` of each of `tables` with a setting; `publication`: the
        existing one whose publish options count (None: one pgcdc creates, publishing all)."""
        update_or_delete = True
        if publication is not None:
            row = self.conn.execute("SELECT pubupdate OR pubdelete FROM pg_publication"
                                    " WHERE pubname = %s", (publication,)).fetchone()
            update_or_delete = bool(row[0]) if row else True
        generated_allowed = self.features.publishes_generated_columns
        found: list[str] = []
        for schema, table in tables:
            setting = setting_for(self.table_settings, schema, table)
            if setting is None:
                continue
            columns, identity, generated = self._column_facts(schema, table)
            if not columns:  # dropped or renamed meanwhile: the next look sees what replaced it
                continue
            found += refusals(schema, table, setting, columns, identity, generated,
                              publishes_update_or_delete=update_or_delete,
                              generated_allowed=generated_allowed)
        return found

    def _column_facts(self, schema: str, table: str
                      ) -> tuple[list[str], list[str], list[str]]:
        """The table's live columns, its replica identity columns (every column for FULL) and
        its generated columns, in attnum order (none: dropped or renamed since it was
        listed)."""
        rows = self.conn.execute(
            "SELECT a.attname::text, c.relreplident = 'f'"
            "  OR coalesce(a.attnum = ANY (ri.indkey::int2[]), false), a.attgenerated <> ''"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " LEFT JOIN pg_index ri ON ri.indrelid = c.oid"
            "  AND ((c.relreplident = 'd' AND ri.indisprimary)"
            "       OR (c.relreplident = 'i' AND ri.indisreplident))"
            " WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped"
            " ORDER BY a.attnum",
            (sql.Identifier(schema, table).as_string(self.conn),)).fetchall()
        return ([r[0] for r in rows], [r[0] for r in rows if r[1]],
                [r[0] for r in rows if r[2]])

    def user_mask_refusals(self, publication: str, settings: Sequence[TableSetting]
                           ) -> list[str]:
        """`published.user_publication_refusals` of each table `publication` (the user's:
        create_publication false) publishes that has masks: what it sends (its column list,
        filter, whether it lists the table) against the masks. Read-only (a standby too)."""
        if not any(s.mask for s in settings):
            return []
        if not self.features.publication_column_lists:
            excluding = [s.pattern for s in settings if s.excluded]
            if excluding:
                return [f"table_settings {excluding[0]!r}: mask exclude needs a column list "
                        f"(PostgreSQL 15+, the server is {self.features.major}): mask the "
                        "column(s) with null instead"]
            sent: dict[tuple[str, str], tuple[list[str] | None, str | None]] = {
                (t[0], t[1]): (None, None) for t in self.published_tables(publication)}
        else:
            sent = {t: (columns, where) for t, (columns, _, where)
                    in self.published_columns(publication).items()}
        listed = set(self.publication_settings(publication))
        found: list[str] = []
        for (schema, table), (published, where) in sorted(sent.items()):
            setting = setting_for(settings, schema, table)
            if setting is None or not setting.mask:
                continue
            columns, identity, _ = self._column_facts(schema, table)
            found += user_publication_refusals(publication, schema, table, setting, columns,
                                               identity, published, where,
                                               listed=(schema, table) in listed)
        return found

    def publication_settings(self, name: str
                             ) -> dict[tuple[str, str], tuple[list[str] | None, str | None]]:
        """(schema, table) -> (its column list, None for all; its row filter) of each table
        publication `name` lists (pg_publication_rel; PostgreSQL 15+, else empty)."""
        if not self.features.publication_column_lists:
            return {}
        rows = self.conn.execute(
            "SELECT n.nspname::text, c.relname::text,"
            " (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a"
            "   WHERE a.attrelid = pr.prrelid AND a.attnum = ANY (pr.prattrs::int2[])),"
            " pg_get_expr(pr.prqual, pr.prrelid)"
            " FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid"
            " JOIN pg_class c ON c.oid = pr.prrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE p.pubname = %s", (name,)).fetchall()
        return {(r[0], r[1]): (list(r[2]) if r[2] is not None else None, r[3]) for r in rows}

    def _resettle(self, name: str, kept: Sequence[tuple[str, str]]) -> list[sql.Composed]:
        """Statements giving each table of `kept` (listed in publication `name`) the column
        list and filter its setting says, where they differ: DROP and ADD again, in the one
        transaction `_publication_ddl` runs (pgoutput reads the publication as of each
        change's commit: no change is decoded without the table published)."""
        if not self.features.publication_column_lists:
            return []
        current = self.publication_settings(name)
        out: list[sql.Composed] = []
        for schema, table in kept:
            setting = self._setting(schema, table)
            columns, where = current.get((schema, table), (None, None))
            want_columns = sorted(setting.columns) if setting and setting.columns else None
            want_where = setting.where if setting else None
            if (sorted(columns) if columns else None) == want_columns and \
                    normalized_filter(where) == normalized_filter(want_where):
                continue
            self.resettled.append((schema, table))
            out += [sql.SQL("ALTER PUBLICATION {} DROP TABLE {}").format(
                        sql.Identifier(name), sql.Identifier(schema, table)),
                    sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(
                        sql.Identifier(name), table_entry(schema, table, setting))]
        return out

    def _with_options(self) -> sql.Composable:
        """The WITH clause of a CREATE PUBLICATION: publish_via_partition_root (`via_root`,
        else the default) and `generated_columns` (18+)."""
        via_root = via_root_change(self.via_root, None)
        options: list[sql.Composable] = [
            sql.SQL("publish_via_partition_root = {}").format(sql.Literal(via_root))]
        if self.generated_columns and self.features.publishes_generated_columns:
            options.append(sql.SQL("publish_generated_columns = stored"))
        return sql.SQL(" WITH ({})").format(sql.SQL(", ").join(options))

    def publishes_via_root(self, name: str) -> bool:
        """The publication's publish_via_partition_root."""
        return bool(self._one("SELECT pubviaroot FROM pg_publication WHERE pubname = %s",
                              (name,))[0])

    def _set_via_root(self, name: str) -> list[sql.Composed]:
        """ALTER PUBLICATION ... SET (publish_via_partition_root = ...) where `via_root` is set
        and differs (`via_root_switched` then says so); unset, the publication keeps its own,
        said at start when it differs from what a new publication gets and it publishes a
        partitioned table."""
        self.via_root_switched = False
        current = self.publishes_via_root(name)
        wanted = via_root_change(self.via_root, current)
        if wanted is None:
            if self.via_root is None and current != VIA_ROOT_DEFAULT and \
                    self.partitioned_published(name):
                log.info("publication %s publishes partitions %s (publish_via_partition_root = "
                         "%s), as it was made; set publish_via_partition_root to change it "
                         "(docs/publishing.md)", name,
                         "through their root" if current else "leaf by leaf", current)
            return []
        self.via_root_switched = True
        log.warning("publication %s: publish_via_partition_root set to %s: partitioned tables "
                    "are now published %s; they are re-read into those topics", name, wanted,
                    "through their root (one topic each)" if wanted else
                    "leaf by leaf (one topic per partition)")
        return [sql.SQL("ALTER PUBLICATION {} SET (publish_via_partition_root = {})").format(
            sql.Identifier(name), sql.Literal(wanted))]

    def partitioned_published(self, publication: str) -> list[tuple[str, str]]:
        """The tables `publication` publishes that are partitioned tables or partitions: the
        ones publish_via_partition_root decides the topic of."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT p.schemaname::text, p.tablename::text"
            f" FROM {self._published()} p JOIN pg_class c ON c.oid = p.relid"
            " WHERE p.pubname = %s AND (c.relkind = 'p' OR c.relispartition) ORDER BY 1, 2",
            (publication,)).fetchall()]

    def partition_leaves(self, publication: str
                         ) -> dict[tuple[str, str], frozenset[tuple[str, str]]]:
        """Each partitioned table `publication` names or publishes -> its leaf partitions
        now (partitions.leaf_changes compares two of these). Read from the catalogs (the
        partitions through pg_inherits: pg_partition_tree locks each), so a lock a migration
        holds on one of them makes it wait for nothing (lock_free.py)."""
        rows = self.conn.execute(
            "WITH RECURSIVE roots AS ("
            f" SELECT c.oid FROM {self._published()} p JOIN pg_class c ON c.oid = p.relid"
            "  WHERE p.pubname = %s AND c.relkind = 'p'"
            " UNION SELECT pr.prrelid FROM pg_publication_rel pr"
            "  JOIN pg_publication b ON b.oid = pr.prpubid"
            "  JOIN pg_class c ON c.oid = pr.prrelid WHERE b.pubname = %s AND c.relkind = 'p'),"
            " tree AS (SELECT r.oid AS root, r.oid AS relid FROM roots r"
            "  UNION SELECT t.root, i.inhrelid FROM tree t"
            "  JOIN pg_inherits i ON i.inhparent = t.relid)"
            " SELECT rn.nspname::text, rc.relname::text, l.nspname::text, l.relname::text"
            " FROM roots r JOIN pg_class rc ON rc.oid = r.oid"
            " JOIN pg_namespace rn ON rn.oid = rc.relnamespace"
            " LEFT JOIN LATERAL (SELECT ln.nspname, lc.relname FROM tree t"
            "  JOIN pg_class lc ON lc.oid = t.relid"
            "  JOIN pg_namespace ln ON ln.oid = lc.relnamespace"
            "  WHERE t.root = r.oid AND lc.relkind = 'r') l ON true",
            (publication, publication)).fetchall()
        out: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for root_schema, root, leaf_schema, leaf in rows:
            leaves = out.setdefault((root_schema, root), set())
            if leaf is not None:
                leaves.add((leaf_schema, leaf))
        return {root: frozenset(leaves) for root, leaves in out.items()}

    def has_rows(self, table: tuple[str, str]) -> bool:
        """Whether `table` holds a row now (False: dropped or renamed since it was listed; the
        next look at the catalog sees what replaced it)."""
        try:
            with self.conn.transaction():  # a savepoint inside the caller's transaction
                return bool(self._one(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(
                    sql.Identifier(*table)))[0])
        except psycopg.Error as exc:
            if not is_vanished(exc):
                raise
            log.debug("table %s.%s: %s", *table, first_line(exc))
            return False

    def _set_generated(self, name: str) -> list[sql.Composed]:
        """ALTER PUBLICATION ... SET (publish_generated_columns = ...) where it differs from
        `generated_columns` (18+; None: left as it is)."""
        if self.generated_columns is None or not self.features.publishes_generated_columns:
            return []
        stored = self._one("SELECT pubgencols = 's' FROM pg_publication WHERE pubname = %s",
                           (name,))[0]
        if bool(stored) == self.generated_columns:
            return []
        return [sql.SQL("ALTER PUBLICATION {} SET (publish_generated_columns = {})").format(
            sql.Identifier(name), sql.SQL("stored" if self.generated_columns else "none"))]

    def keyless_tables(self, tables: Sequence[tuple[str, str]] | None
                       ) -> list[tuple[str, str]]:
        """`keyless.keyless_tables`."""
        return keyless_policy.keyless_tables(self.conn, tables)

    def full_identity_tables(self, tables: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """`keyless.full_identity_tables`."""
        return keyless_policy.full_identity_tables(self.conn, tables)

    def apply_keyless_policy(self, policy: str, tables: Sequence[tuple[str, str]] | None, *,
                             publication: str = "", patterns: Sequence[str] | None = None
                             ) -> list[tuple[str, str]]:
        """`keyless.apply_keyless_policy` (--keyless-tables) on this source."""
        return keyless_policy.apply_keyless_policy(self, policy, tables,
                                                   publication=publication, patterns=patterns)

    def _published(self) -> str:
        """pg_publication_tables without its locks (lock_free.py), for after FROM."""
        return published_tables_sql(ServerFeatures(self.conn.info.server_version))

    def is_all_tables(self, name: str) -> bool:
        return bool(self._one("SELECT puballtables FROM pg_publication WHERE pubname = %s",
                              (name,))[0])

    def published_tables(self, publication: str) -> list[tuple[str, str, str, bool]]:
        """(schema, table, relreplident, has a primary key) of each published table."""
        rows = self.conn.execute(
            "SELECT p.schemaname::text, p.tablename::text, c.relreplident,"
            " EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)"
            f" FROM {self._published()} p JOIN pg_class c ON c.oid = p.relid"
            " WHERE p.pubname = %s ORDER BY 1, 2",
            (publication,),
        ).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def published_columns(self, publication: str
                          ) -> dict[tuple[str, str], tuple[list[str], int, str | None]]:
        """(schema, table) -> (the columns pgoutput sends, how many live columns the table has,
        its row filter) of each published table (PostgreSQL 15+, else empty)."""
        if not self.features.publication_column_lists:
            return {}
        rows = self.conn.execute(
            "SELECT p.schemaname::text, p.tablename::text,"
            # Before 18 the view lists generated columns, which pgoutput never sends.
            " ARRAY(SELECT x::text FROM unnest(p.attnames) AS x WHERE %s OR NOT EXISTS ("
            "   SELECT 1 FROM pg_attribute g WHERE g.attrelid = c.oid AND g.attname = x"
            "   AND g.attgenerated <> '')), p.rowfilter,"
            " (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0"
            "   AND NOT a.attisdropped)::int"
            f" FROM {self._published()} p JOIN pg_class c ON c.oid = p.relid"
            " WHERE p.pubname = %s",
            (self.features.publishes_generated_columns, publication)).fetchall()
        return {(r[0], r[1]): (list(r[2] or []), r[4], r[3]) for r in rows}

    def table_counts(self, tables: Sequence[tuple[str, str]]) -> list[tuple[int, int, int, int]]:
        """(inserts, updates, deletes, live rows) per table from pg_stat_user_tables."""
        counts = []
        for schema, table in tables:
            row = self.conn.execute(
                "SELECT n_tup_ins, n_tup_upd, n_tup_del, n_live_tup FROM pg_stat_user_tables"
                " WHERE schemaname = %s AND relname = %s", (schema, table)).fetchone()
            counts.append(tuple(row) if row else (0, 0, 0, 0))
        return counts

    def warn_about_replica_identity(self, publication: str) -> list[str]:
        """Tables whose UPDATE/DELETE events cannot carry a key; logged as warnings."""
        weak = []
        for schema, table, ident, has_pk in self.published_tables(publication):
            if ident == "n" or (ident == "d" and not has_pk):
                weak.append(f"{schema}.{table}")
                log.warning(
                    "table %s.%s has no replica identity key (REPLICA IDENTITY %s, %s): its "
                    "UPDATE/DELETE events carry no key (and PostgreSQL rejects UPDATE/DELETE on it "
                    "while it is published); add a primary key or ALTER TABLE ... REPLICA "
                    "IDENTITY FULL", schema, table, "NOTHING" if ident == "n" else "DEFAULT",
                    "no primary key")
        return weak
