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
  leaf, as publish_via_partition_root says), as `ReplicationAdmin.matching_tables` does.
* CREATE TABLE AS, SELECT INTO (CREATE TABLE ... AS EXECUTE too): the rows the command wrote
  itself were written before the table joined, so pgoutput, which decides with the catalog as of
  each change, does not publish them. Once the table is added, the trigger writes them into the
  WAL again, in the same transaction, as transactional ``pgcdc.rows`` messages (`ROWS_PREFIX`;
  at most `ROWS_PER_MESSAGE` rows or about `ROWS_MESSAGE_BYTES` each, in the table's scan
  order). Each carries the publication, what pgoutput's Relation (and Type) messages would say of
  the table at that point (relation id, names, replica identity, the published columns: name,
  type OID, typmod, key flag) and each row's values as the type's output text, NULL distinct,
  under the session settings every text pgcdc reads is printed with
  (connector/pgtypes/session.py; pinned by the function's SET clauses). The producer of that
  publication turns each message into those Type, Relation and text Insert messages at the
  message's position (`created_rows`, fed to the assembler: connector/pipeline.py), so they are
  the table's first inserts, before its later changes in the transaction, through the one path
  every streamed row takes; another publication's producer ignores them. A table of settings
  (below) or left out has no message; nor has WITH NO DATA (no rows), nor a publication that
  does not publish inserts (``publish`` without ``insert``). The table has no column list or
  row filter (those are the watcher's), and its columns are all plain (a CREATE TABLE AS makes
  no generated column): every column and row is what pgoutput would have sent. EXPLAIN ANALYZE
  CREATE TABLE AS / SELECT INTO fires no event trigger (PostgreSQL runs no DDL command for it):
  such a table joins through the watcher, with an incremental snapshot of its rows. In a
  transaction streamed while in progress, a savepoint rolled back after its CREATE TABLE AS
  leaves the rows published when no other change of it reached the stream: pgoutput sends a
  streamed transaction's messages under its top-level xid (connector/assembler/assembler.py),
  so the Stream Abort of the savepoint cannot be told to cover them (docs/publishing.md).
* DROP TABLE (DROP SCHEMA ... CASCADE, DROP OWNED ...) of a table the publication lists: a second
  event trigger, on ``sql_drop`` (`drop_names`), writes its ``pgcdc.drop`` message in the DROP's
  transaction, naming the publication (connector/replication/drops.py), so its drop event sits
  exactly at the DROP, also for a table dropped before the watcher ever saw it.
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

from connector.control import DROP_PREFIX, ROWS_PREFIX
from connector.errors import ConfigError, first_line
from connector.names import SIGNAL_TABLE
from connector.pgoutput.messages import (
    COLUMN_KEY,
    Insert,
    Message,
    Relation,
    RelationColumn,
    Type,
)
from connector.pgtypes.session import OUTPUT_SETTINGS

__all__ = ["LOCK_TIMEOUT", "ROWS_MESSAGE_BYTES", "ROWS_PER_MESSAGE", "VERSION", "TriggerSettings",
           "created_rows", "drop_names", "ensure_table_trigger", "glob_regex", "install_sql",
           "installed_comment", "names", "remove_sql"]

#: The function comment starts with it: an older install is re-created (or refused) at start.
VERSION = "pgcdc table_trigger 3"
#: A ``pgcdc.rows`` message holds at most this many rows, and is closed once its rows pass
#: `ROWS_MESSAGE_BYTES` of text (so one row larger than that is a message of its own).
ROWS_PER_MESSAGE = 1000
ROWS_MESSAGE_BYTES = 4 * 1024 * 1024
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


def drop_names(publication: str) -> tuple[str, str]:
    """(function, event trigger) of `publication`'s ``sql_drop`` trigger (`names`' hash)."""
    digest = hashlib.sha256(publication.encode()).hexdigest()[:16]
    return f"public.pgcdc_drops_{digest}()", f"pgcdc_drops_{digest}"


def _text_array(values: Sequence[str]) -> str:
    return sql.SQL("ARRAY[{}]::text[]").format(
        sql.SQL(", ").join(sql.Literal(v) for v in values)).as_string(None)


def install_sql(settings: TriggerSettings) -> str:
    """The SQL creating the function and event trigger of one publication (run as a
    superuser; idempotent)."""
    function, trigger = names(settings.publication)
    drop_function, drop_trigger = drop_names(settings.publication)
    all_tables = settings.patterns is None
    regexes = pattern_regexes(settings.patterns or [])
    set_regexes = pattern_regexes([p for p, _ in settings.settings])
    q = sql.Literal
    output_settings = " ".join(f"SET {name} = {q(value).as_string(None)}"
                               for name, value in OUTPUT_SETTINGS)
    return f"""\
BEGIN;
DROP EVENT TRIGGER IF EXISTS {trigger};
DROP FUNCTION IF EXISTS {function};
DROP EVENT TRIGGER IF EXISTS {drop_trigger};
DROP FUNCTION IF EXISTS {drop_function};
CREATE FUNCTION {function} RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET lock_timeout = {q(LOCK_TIMEOUT).as_string(None)}
{output_settings} SET synchronize_seqscans = off AS $pgcdc$
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
  head text;
  row_text text;
  line text;
  chunk text[];
  chunk_bytes bigint;
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
      IF TG_TAG IN ('CREATE TABLE AS', 'SELECT INTO')
         AND (SELECT b.pubinsert FROM pg_publication b WHERE b.pubname = pub) THEN
        -- the rows the command wrote before the table joined, as pgcdc.rows messages: what
        -- pgoutput's Type and Relation messages would say of it now, each row's output text
        SELECT json_build_object(
          'publication', pub, 'relation_id', c.oid::bigint, 'schema', t.nspname,
          'table', t.relname, 'replica_identity', c.relreplident::text,
          'types', (SELECT coalesce(json_agg(json_build_array(a.atttypid::bigint,
                      CASE WHEN bn.nspname = 'pg_catalog' THEN '' ELSE bn.nspname::text END,
                      bt.typname::text) ORDER BY a.attnum), '[]')
                    FROM pg_attribute a
                    CROSS JOIN LATERAL (
                      WITH RECURSIVE d(o) AS (
                        SELECT a.atttypid
                        UNION ALL SELECT y.typbasetype FROM d JOIN pg_type y ON y.oid = d.o
                                  WHERE y.typtype = 'd')
                      SELECT y.oid FROM d JOIN pg_type y ON y.oid = d.o
                      WHERE y.typtype <> 'd') b(base)
                    JOIN pg_type bt ON bt.oid = b.base
                    JOIN pg_namespace bn ON bn.oid = bt.typnamespace
                    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                      AND a.attgenerated = '' AND a.atttypid >= 10000),
          'columns', (SELECT coalesce(json_agg(json_build_array(a.attname::text,
                        a.atttypid::bigint, a.atttypmod,
                        CASE c.relreplident WHEN 'f' THEN true
                          WHEN 'n' THEN false
                          ELSE EXISTS (SELECT FROM pg_index i
                                       WHERE i.indrelid = c.oid
                                         AND CASE c.relreplident WHEN 'd' THEN i.indisprimary
                                                                 ELSE i.indisreplident END
                                         AND a.attnum = ANY (SELECT i.indkey[k] FROM
                                               generate_series(0, i.indnkeyatts - 1) k)) END)
                        ORDER BY a.attnum), '[]')
                      FROM pg_attribute a
                      WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                        AND a.attgenerated = ''))::text,
          'to_json(ARRAY[' || coalesce(string_agg(format(
            'CASE WHEN num_nulls(r.%I) = 0 THEN format(%L, r.%I) END',
            a.attname, '%s', a.attname), ', ' ORDER BY a.attnum)
            FILTER (WHERE a.attnum IS NOT NULL), '') || ']::text[])::text'
        INTO head, row_text
        FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
          AND NOT a.attisdropped AND a.attgenerated = ''
        WHERE c.oid = t.oid GROUP BY c.oid, c.relreplident;
        head := left(head, -1) || ', "rows" : [';
        chunk := '{{}}';
        chunk_bytes := 0;
        FOR line IN EXECUTE format('SELECT %s FROM ONLY %s r', row_text, t.oid::regclass) LOOP
          chunk := chunk || line;
          chunk_bytes := chunk_bytes + octet_length(line);
          IF cardinality(chunk) >= {ROWS_PER_MESSAGE} OR chunk_bytes >= {ROWS_MESSAGE_BYTES} THEN
            PERFORM pg_logical_emit_message(true, {q(ROWS_PREFIX).as_string(None)}, convert_to(
              head || array_to_string(chunk, ',') || ']}}', 'UTF8'));
            chunk := '{{}}';
            chunk_bytes := 0;
          END IF;
        END LOOP;
        IF cardinality(chunk) > 0 THEN
          PERFORM pg_logical_emit_message(true, {q(ROWS_PREFIX).as_string(None)}, convert_to(
            head || array_to_string(chunk, ',') || ']}}', 'UTF8'));
        END IF;
      END IF;
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
CREATE FUNCTION {drop_function} RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $pgcdc$
DECLARE
  pub text := {q(settings.publication).as_string(None)};
  d record;
BEGIN
  -- each table this publication listed, dropped: its pgcdc.drop message in the DROP's
  -- transaction (connector/replication/drops.py)
  FOR d IN
    SELECT DISTINCT t.objid, t.address_names[1] AS nspname, t.address_names[2] AS relname
    FROM pg_event_trigger_dropped_objects() m
    JOIN pg_event_trigger_dropped_objects() t
      ON t.classid = 'pg_class'::regclass AND t.object_type = 'table'
     AND t.address_names = m.address_names
    WHERE m.object_type = 'publication relation' AND m.address_args = ARRAY[pub]
  LOOP
    BEGIN
      PERFORM pg_logical_emit_message(true, {q(DROP_PREFIX).as_string(None)},
        json_build_object('schema', d.nspname, 'table', d.relname,
                          'relation_id', d.objid::bigint, 'slot', '', 'publication', pub,
                          'seen_lsn', (pg_current_wal_insert_lsn() - '0/0')::bigint)::text);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'pgcdc: drop of table %.% not recorded for publication % (left to pgcdc''s '
                    'table watcher): %', d.nspname, d.relname, pub, SQLERRM;
    END;
  END LOOP;
END $pgcdc$;
CREATE EVENT TRIGGER {drop_trigger} ON sql_drop EXECUTE FUNCTION {drop_function};
COMMIT;"""


def created_rows(message: Message, publication: str) -> list[Type | Relation | Insert]:
    """The Type, Relation and Insert messages pgoutput would have sent for the rows of a
    ``pgcdc.rows`` message (module docstring), each with the message's xid (set in a stream
    block): its Types, its Relation, one Insert of text values per row, in order. Empty when it
    is another publication's. ValueError, naming what is wrong, for anything else."""
    try:
        doc = json.loads(message.content)
        if _text(doc["publication"]) != publication:
            return []
        xid = message.xid
        columns = tuple(RelationColumn(COLUMN_KEY if key else 0, _text(name), int(type_oid),
                                       int(typmod))
                        for name, type_oid, typmod, key in doc["columns"])
        relation = Relation(xid, int(doc["relation_id"]), _text(doc["schema"]),
                            _text(doc["table"]), _text(doc["replica_identity"]), columns)
        out: list[Type | Relation | Insert] = [
            Type(xid, int(type_oid), _text(namespace), _text(name))
            for type_oid, namespace, name in doc["types"]]
        out.append(relation)
        width = len(columns)
        for row in doc["rows"]:
            if not isinstance(row, list) or len(row) != width or not all(
                    v is None or isinstance(v, str) for v in row):
                raise ValueError(f"a row of {width} text values or nulls expected, got {row!r:.80}")
            out.append(Insert(xid, relation.relation_id, tuple(row)))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a {ROWS_PREFIX} message ({type(exc).__name__}: {exc})") from None
    return out


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a string expected, got {value!r:.40}")
    return value


def remove_sql(publication: str) -> str:
    """The SQL removing the trigger of `publication` (a superuser)."""
    function, trigger = names(publication)
    drop_function, drop_trigger = drop_names(publication)
    return (f"DROP EVENT TRIGGER IF EXISTS {trigger}; DROP FUNCTION IF EXISTS {function}; "
            f"DROP EVENT TRIGGER IF EXISTS {drop_trigger}; "
            f"DROP FUNCTION IF EXISTS {drop_function};")


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
