"""The event trigger of ``table_trigger``: a new table matching ``--tables`` joins the table list
publication in the transaction that creates it (docs/publishing.md, "New tables").

pgoutput publishes a change only if its table was in the publication when the change was
written (decoded with the catalog as of that change), so a table the table watcher adds (every
`WATCH_INTERVAL_S`, connector/snapshot/incremental/watcher.py) has its first seconds of changes
only as incremental snapshot rows, and one dropped within them is never seen. Only the database
sees the moment a table is created, so one ``ddl_command_end`` event trigger per publication
(superuser to create; `install_sql`) does the watcher's work there, before the creating
transaction commits:

* CREATE TABLE, CREATE TABLE AS, SELECT INTO, CREATE SCHEMA (its CREATE TABLE elements): each
  new table (relkind r or p, permanent, outside
  ``pg_*`` and ``information_schema``, not the signal table) whose name matches the patterns --
  translated from the ``--tables`` globs by `glob_regex`, which agrees with the Python matcher
  (`connector.names.pattern_matches`, fnmatch) -- is added to the publication. A partition whose
  partitioned root matches is left to the root, which publishes it (through the root or leaf by
  leaf, as publish_via_partition_root says), as `ReplicationAdmin.matching_tables` does. The rows
  a CREATE TABLE AS / SELECT INTO writes itself are written before the statement ends, so before
  the table joins: they are not streamed (its later changes are); a key added later does not
  bring them either (the table is then already published, the watcher requests no snapshot).
* ALTER TABLE (RENAME, SET SCHEMA, SET LOGGED, ADD PRIMARY KEY ...) making an unpublished table
  match: added only while it is empty (nothing written before is missing); one holding rows is
  left to the watcher, which adds it with an incremental snapshot of them.
* Without a key (``--keyless-tables``): ``full`` sets REPLICA IDENTITY FULL on the table (and
  its keyless partitions) before adding it, also on a new keyless partition of a published root
  and, for a FOR ALL TABLES publication, on every new keyless table (which that publication has
  already published); ``refuse`` and ``skip`` leave it out (the watcher warns about it as
  before). Either way no UPDATE or DELETE of the application is ever rejected.
* A table whose first matching ``table_settings`` pattern gives a column list, a row filter or
  masks is left to the watcher (which adds it with them and its snapshot): the trigger never
  publishes a column a setting keeps out.

The trigger never makes the application's DDL fail: each table is handled in its own
sub-transaction, and any error (a lock not granted within `LOCK_TIMEOUT`, a concurrent drop)
rolls back only that table's work and is a WARNING naming it, the table left to the watcher,
which is today's path; no error is worth the application's statement. ALTER PUBLICATION ... ADD
TABLE locks the publication until commit: a second transaction creating a matching table waits
for the first to commit (at most `LOCK_TIMEOUT`, then the watcher's path).

The function is SECURITY DEFINER (any role may create tables; only the publication's owner may
extend it) with a fixed search_path; its settings (publication, patterns, policy, the settings'
patterns) are literals in its body, and its comment is `VERSION` followed by them as JSON, which
pgcdc compares at start (`ensure_table_trigger`): one function and trigger per publication,
named from a hash of its name, so producers with different publications never clash. A nested
ALTER TABLE (its own REPLICA IDENTITY FULL) is skipped through the transaction-local setting
``pgcdc.table_trigger_busy``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import psycopg
from psycopg import sql

from connector.errors import ConfigError, first_line
from connector.names import SIGNAL_TABLE

__all__ = ["LOCK_TIMEOUT", "VERSION", "TriggerSettings", "ensure_table_trigger", "glob_regex",
           "install_sql", "installed_comment", "names", "remove_sql"]

#: The function comment starts with it: an older install is re-created (or refused) at start.
VERSION = "pgcdc table_trigger 2"
#: How long a CREATE TABLE waits for the publication's lock before the table is left to the
#: watcher (another transaction that created a table holds it until it commits).
LOCK_TIMEOUT = "2s"


def glob_regex(glob: str) -> str:
    """The PostgreSQL regular expression (ARE, ``~``) matching exactly the names
    `fnmatch.fnmatchcase(name, glob)` matches: ``*`` any run, ``?`` one character, ``[...]`` a
    set (``[!...]`` its complement, ``]`` first is a member, an unclosed ``[`` is itself),
    anything else itself; anchored at both ends (``\\A``, ``\\Z``)."""
    out = ["\\A"]
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                out.append("\\[")
                continue
            body = glob[i:j]
            i = j + 1
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            out.append(_bracket(body, negate))
        else:
            out.append(_literal(c))
    out.append("\\Z")
    return "".join(out)


def _literal(c: str) -> str:
    return c if c.isalnum() or c == "_" or ord(c) > 127 else "\\" + c


def _bracket(body: str, negate: bool) -> str:
    """A set: its members, ranges ``a-z`` kept (an empty range, z-a, matches nothing, as in
    fnmatch); every other character escaped."""
    parts: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            if lo <= hi:
                parts.append(f"{_literal(lo)}-{_literal(hi)}")
            k += 3
        else:
            parts.append(_literal(body[k]))
            k += 1
    if not parts:  # only empty ranges: no character (negated: any character)
        return "." if negate else "\\Z."
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def pattern_regexes(patterns: Sequence[str]) -> list[tuple[str, str]]:
    """(schema regex, table regex) of each ``schema.table`` glob (no schema: ``public``),
    split as `connector.names.pattern_matches` splits it."""
    out = []
    for pattern in patterns:
        schema, _, table = pattern.rpartition(".")
        out.append((glob_regex(schema or "public"), glob_regex(table)))
    return out


class TriggerSettings:
    """What the trigger of one publication knows: its `patterns` (the managed ones,
    `managed_patterns`; None: a FOR ALL TABLES publication), the keyless policy, and the
    table_settings patterns in order with whether each keeps a table for the watcher."""

    def __init__(self, publication: str, patterns: Sequence[str] | None, keyless: str,
                 settings: Sequence[tuple[str, bool]] = ()) -> None:
        self.publication = publication
        self.patterns = None if patterns is None else list(patterns)
        self.keyless = keyless
        self.settings = [(p, bool(w)) for p, w in settings]

    def comment(self) -> str:
        """The function's comment: `VERSION` and the settings, compared at start."""
        return VERSION + " " + json.dumps({
            "publication": self.publication, "patterns": self.patterns,
            "keyless": self.keyless, "settings": self.settings}, sort_keys=True)


def names(publication: str) -> tuple[str, str]:
    """(function, event trigger) of `publication`'s trigger: a hash keeps any publication name
    within PostgreSQL's 63 bytes and apart from the others."""
    digest = hashlib.sha256(publication.encode()).hexdigest()[:16]
    return f"public.pgcdc_tables_{digest}()", f"pgcdc_tables_{digest}"


def _text_array(values: Sequence[str]) -> str:
    return sql.SQL("ARRAY[{}]::text[]").format(
        sql.SQL(", ").join(sql.Literal(v) for v in values)).as_string(None)


def install_sql(settings: TriggerSettings) -> str:
    """The SQL creating the function and event trigger of one publication (run as a
    superuser; idempotent)."""
    function, trigger = names(settings.publication)
    all_tables = settings.patterns is None
    regexes = pattern_regexes(settings.patterns or [])
    set_regexes = pattern_regexes([p for p, _ in settings.settings])
    q = sql.Literal
    return f"""\
BEGIN;
DROP EVENT TRIGGER IF EXISTS {trigger};
DROP FUNCTION IF EXISTS {function};
CREATE FUNCTION {function} RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET lock_timeout = {q(LOCK_TIMEOUT).as_string(None)} AS $pgcdc$
DECLARE
  pub text := {q(settings.publication).as_string(None)};
  all_tables boolean := {q(all_tables).as_string(None)};
  pat_schemas text[] := {_text_array([s for s, _ in regexes])};
  pat_tables text[] := {_text_array([t for _, t in regexes])};
  set_schemas text[] := {_text_array([s for s, _ in set_regexes])};
  set_tables text[] := {_text_array([t for _, t in set_regexes])};
  set_watcher boolean[] := ARRAY[{", ".join(q(w).as_string(None)
                                            for _, w in settings.settings)}]::boolean[];
  keyless text := {q(settings.keyless).as_string(None)};
  t record;
  root oid;
  keyless_rels oid[];
  rel oid;
  has_rows boolean;
BEGIN
  IF coalesce(current_setting('pgcdc.table_trigger_busy', true), '') = 'on' THEN RETURN; END IF;
  IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = pub) THEN RETURN; END IF;
  PERFORM set_config('pgcdc.table_trigger_busy', 'on', true);
  FOR t IN
    SELECT DISTINCT c.oid, n.nspname::text AS nspname, c.relname::text AS relname,
           c.relispartition
    FROM pg_event_trigger_ddl_commands() d
    JOIN pg_class c ON c.oid = d.objid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE d.classid = 'pg_class'::regclass AND c.relkind IN ('r', 'p')
      AND c.relpersistence = 'p' AND n.nspname <> 'information_schema'
      AND n.nspname NOT LIKE 'pg\\_%'
      AND NOT (n.nspname = {q(SIGNAL_TABLE.schema).as_string(None)}
               AND c.relname = {q(SIGNAL_TABLE.table).as_string(None)})
  LOOP
    BEGIN
      -- the table and its partitions that PostgreSQL would refuse UPDATE and DELETE on once
      -- published (ReplicationAdmin.keyless_tables)
      SELECT array_agg(k.oid) INTO keyless_rels FROM pg_class k
      WHERE k.oid IN (SELECT t.oid UNION ALL SELECT p.relid FROM pg_partition_tree(t.oid) p)
        AND k.relkind IN ('r', 'p')
        AND ((k.relreplident = 'd' AND NOT EXISTS (SELECT FROM pg_index i
              WHERE i.indrelid = k.oid AND i.indisprimary))
          OR (k.relreplident = 'i' AND NOT EXISTS (SELECT FROM pg_index i
              WHERE i.indrelid = k.oid AND i.indisreplident)));
      IF all_tables THEN  -- FOR ALL TABLES has published it: only the policy's FULL
        IF keyless = 'full' AND keyless_rels IS NOT NULL THEN
          FOREACH rel IN ARRAY keyless_rels LOOP
            EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', rel::regclass);
          END LOOP;
        END IF;
        CONTINUE;
      END IF;
      CONTINUE WHEN NOT EXISTS (SELECT FROM unnest(pat_schemas, pat_tables) p(s, r)
                                WHERE t.nspname ~ p.s AND t.relname ~ p.r);
      IF t.relispartition THEN
        root := pg_partition_root(t.oid);
        IF EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
                          unnest(pat_schemas, pat_tables) p(s, r)
                   WHERE c.oid = root AND n.nspname::text ~ p.s AND c.relname::text ~ p.r) THEN
          -- its root publishes it (if published): only the policy's FULL, or it would be a
          -- published partition rejecting UPDATE and DELETE
          IF keyless = 'full' AND keyless_rels IS NOT NULL AND EXISTS (
              SELECT FROM pg_publication_rel pr JOIN pg_publication b ON b.oid = pr.prpubid
              WHERE b.pubname = pub AND pr.prrelid = root) THEN
            FOREACH rel IN ARRAY keyless_rels LOOP
              EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', rel::regclass);
            END LOOP;
          END IF;
          CONTINUE;
        END IF;
      END IF;
      CONTINUE WHEN EXISTS (SELECT FROM pg_publication_rel pr
                            JOIN pg_publication b ON b.oid = pr.prpubid
                            WHERE b.pubname = pub AND pr.prrelid = t.oid);
      -- the first table_settings pattern matching decides: a column list, filter or mask is
      -- the watcher's to apply
      CONTINUE WHEN coalesce((SELECT s.w FROM unnest(set_schemas, set_tables, set_watcher)
                                       WITH ORDINALITY s(s, r, w, i)
                              WHERE t.nspname ~ s.s AND t.relname ~ s.r
                              ORDER BY s.i LIMIT 1), false);
      IF TG_TAG = 'ALTER TABLE' THEN  -- holding rows written before: the watcher's snapshot
        EXECUTE format('SELECT EXISTS (SELECT FROM %s)', t.oid::regclass) INTO has_rows;
        CONTINUE WHEN has_rows;
      END IF;
      IF keyless_rels IS NOT NULL THEN
        CONTINUE WHEN keyless <> 'full';  -- refuse, skip: left out, the watcher warns
        FOREACH rel IN ARRAY keyless_rels LOOP
          EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', rel::regclass);
        END LOOP;
      END IF;
      EXECUTE format('ALTER PUBLICATION %I ADD TABLE %s', pub, t.oid::regclass);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'pgcdc: table % not added to publication % (left to pgcdc''s table '
                    'watcher, which adds it within seconds): %', t.oid::regclass, pub, SQLERRM;
    END;
  END LOOP;
  PERFORM set_config('pgcdc.table_trigger_busy', '', true);
END $pgcdc$;
COMMENT ON FUNCTION {function} IS {q(settings.comment()).as_string(None)};
CREATE EVENT TRIGGER {trigger} ON ddl_command_end
  WHEN TAG IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO', 'CREATE SCHEMA',
               'ALTER TABLE')
  EXECUTE FUNCTION {function};
COMMIT;"""


def remove_sql(publication: str) -> str:
    """The SQL removing the trigger of `publication` (a superuser)."""
    function, trigger = names(publication)
    return f"DROP EVENT TRIGGER IF EXISTS {trigger}; DROP FUNCTION IF EXISTS {function};"


_INSTALLED = """\
SELECT obj_description(e.evtfoid, 'pg_proc')
FROM pg_catalog.pg_event_trigger e
WHERE e.evtname = %s AND e.evtenabled <> 'D'"""


def installed_comment(conn: psycopg.Connection[tuple],  # type: ignore[type-arg]
                      publication: str) -> str | None:
    """The comment of `publication`'s enabled trigger function (None: no trigger)."""
    row = conn.execute(_INSTALLED, (names(publication)[1],)).fetchone()
    return None if row is None else str(row[0] or "")


def ensure_table_trigger(conn: psycopg.Connection[tuple],  # type: ignore[type-arg]
                         settings: TriggerSettings, *, read_only: bool = False) -> str:
    """Install (re-create) the trigger when the role is a superuser, else check a DBA
    installed it with these settings; a `ConfigError` naming what to run when neither.
    `read_only` (a standby): only the check. Returns what was done, for the log."""
    present = installed_comment(conn, settings.publication) == settings.comment()
    if present and (read_only or not _is_superuser(conn)):
        return "present"
    how = ("have a superuser run the SQL `pgcdc grants --table-trigger-sql` prints (with this "
           "run's --config, --tables, --publication and --keyless-tables), or set "
           "table_trigger: false")
    if read_only:
        raise ConfigError(f"table_trigger: the event trigger of publication "
                          f"{settings.publication!r} with these settings is not installed on "
                          f"the primary: run pgcdc there once as a superuser, or {how}")
    if not _is_superuser(conn):
        raise ConfigError(f"table_trigger needs an event trigger with these settings, which "
                          f"only a superuser may create, and role {conn.info.user} is not one: "
                          f"{how}")
    try:
        conn.execute(install_sql(settings))  # its own BEGIN ... COMMIT
    except psycopg.Error as exc:
        raise ConfigError(f"table_trigger: installing the event trigger failed: "
                          f"{first_line(exc)}") from None
    return "installed"


def _is_superuser(conn: psycopg.Connection[tuple]) -> bool:  # type: ignore[type-arg]
    row = conn.execute("SELECT rolsuper FROM pg_catalog.pg_roles "
                       "WHERE rolname = current_user").fetchone()
    return bool(row and row[0])
