"""The event triggers of ``detach_deletes``: a DETACHed partition's keys, as transactional logical
messages written inside the DETACH's own transaction (docs/publishing.md, Partitioned tables).

pgoutput carries no trace of a DETACH, so without help the detached rows stay in the root's
topic. Only the database sees the exact moment, so two event triggers (superuser to create,
once) write it into the WAL:

* ``ddl_command_start`` of ALTER TABLE stashes the (root, leaf) pairs of every partitioned
  table a ``publish_via_partition_root`` publication publishes, in a session setting
  (``pgcdc.partition_members``; session-wide, not transaction-local, so the second transaction
  of ``DETACH PARTITION ... CONCURRENTLY`` still sees it). From SQL the ALTER's subcommand is
  not visible (``pg_event_trigger_ddl_commands()`` gives the parent's OID and an opaque
  ``pg_ddl_command``), hence the before/after comparison.
* ``ddl_command_end`` of ALTER TABLE compares the stash with the pairs now: a leaf gone from
  its root but still a table was detached (directly, or within a detached sub-partitioned
  table). Its rows are still there, in the same transaction, so the root's replica-identity
  columns are read from it (``FROM ONLY`` the leaf) as text -- through each type's output
  function (``format('%s', ...)``, as pgoutput's text tuples; not ``::text``, which differs for
  bpchar and inet) with ISO dates, UTC and hex bytea pinned on the function -- and emitted as
  ``pg_logical_emit_message(true, 'pgcdc.detach', json)`` messages of at most `CHUNK_KEYS`
  keys each. Transactional messages are decoded in their transaction, in order, at the
  DETACH's position: the producer turns each key into a delete on the root's topic
  (`connector.replication.partitions.detach_deletes`). A DETACH ... CONCURRENTLY writes them in
  its second transaction (where the partition leaves ``pg_inherits``).

The functions are SECURITY DEFINER (a user without EXECUTE on pg_logical_emit_message may
detach) with a fixed search_path; install drops and re-creates them, so they are owned by the
superuser installing them. Not covered: ``DROP TABLE`` of an attached partition (at
``sql_drop`` its rows are already gone, and ``ddl_command_start`` cannot tell which table a
DROP names): detach first.
"""

from __future__ import annotations

import psycopg

from connector.control import DETACH_PREFIX
from connector.errors import ConfigError, first_line

__all__ = ["CHUNK_KEYS", "VERSION", "ensure_detach_trigger", "install_sql", "remove_sql"]

#: Keys per message: a big partition is many moderate WAL records, not one huge one.
CHUNK_KEYS = 1000
#: The function comment names it: a DBA's older install is re-created (or refused) at start.
VERSION = "pgcdc detach_deletes 1"

# (root, leaf) of every leaf under a root some publish_via_partition_root publication
# publishes, as 'root:leaf,...' (OIDs).
_MEMBERS = """(
  SELECT coalesce(string_agg(DISTINCT r.oid::int8 || ':' || t.relid::oid::int8, ','), '')
  FROM pg_publication p
  JOIN pg_publication_tables pt ON pt.pubname = p.pubname
  JOIN pg_namespace n ON n.nspname = pt.schemaname
  JOIN pg_class r ON r.relnamespace = n.oid AND r.relname = pt.tablename AND r.relkind = 'p'
  CROSS JOIN LATERAL pg_partition_tree(r.oid) t
  JOIN pg_class l ON l.oid = t.relid AND l.relkind = 'r'
  WHERE p.pubviaroot)"""

_FUNCTIONS = ("public.pgcdc_detach_start()", "public.pgcdc_detach_end()")
_TRIGGERS = ("pgcdc_detach_start", "pgcdc_detach_end")


def install_sql() -> str:
    """The SQL creating the functions and event triggers (run as a superuser; idempotent)."""
    return f"""\
BEGIN;
DROP EVENT TRIGGER IF EXISTS pgcdc_detach_end;
DROP EVENT TRIGGER IF EXISTS pgcdc_detach_start;
DROP FUNCTION IF EXISTS public.pgcdc_detach_end();
DROP FUNCTION IF EXISTS public.pgcdc_detach_start();
CREATE FUNCTION public.pgcdc_detach_start() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $pgcdc$
BEGIN
  PERFORM set_config('pgcdc.partition_members', {_MEMBERS}, false);
END $pgcdc$;
CREATE FUNCTION public.pgcdc_detach_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET datestyle = 'ISO, MDY' SET intervalstyle = 'postgres' SET timezone = 'UTC'
SET extra_float_digits = 3 SET bytea_output = 'hex' AS $pgcdc$
DECLARE
  members text := coalesce(current_setting('pgcdc.partition_members', true), '');
  pair record;
  cols text[];
  exprs text;
  content text;
BEGIN
  IF members = '' THEN RETURN; END IF;
  PERFORM set_config('pgcdc.partition_members', '', false);
  FOR pair IN
    SELECT split_part(m, ':', 1)::oid AS root, split_part(m, ':', 2)::oid AS leaf
    FROM unnest(string_to_array(members, ',')) m
    EXCEPT
    SELECT split_part(m, ':', 1)::oid, split_part(m, ':', 2)::oid
    FROM unnest(string_to_array({_MEMBERS}, ',')) m
  LOOP
    CONTINUE WHEN NOT EXISTS (SELECT FROM pg_class WHERE oid = pair.leaf AND relkind = 'r')
               OR NOT EXISTS (SELECT FROM pg_class WHERE oid = pair.root);
    -- the root's replica identity, as pgoutput keys it (connector/snapshot/tables.py)
    SELECT array_agg(a.attname::text ORDER BY a.attnum) INTO cols
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_index i ON i.indrelid = c.oid
         AND ((c.relreplident = 'd' AND i.indisprimary)
              OR (c.relreplident = 'i' AND i.indisreplident))
    WHERE a.attrelid = pair.root AND a.attnum > 0 AND NOT a.attisdropped
      AND (c.relreplident = 'f' OR a.attnum = ANY (i.indkey::int2[]));
    CONTINUE WHEN cols IS NULL;
    SELECT string_agg(format('CASE WHEN %1$I IS NOT NULL THEN format(''%%s'', %1$I) END', c),
                      ', ')
      INTO exprs FROM unnest(cols) c;
    FOR content IN EXECUTE format(
      'SELECT json_build_object(''root'', %s, ''schema'', %L, ''table'', %L,'
      ' ''partition'', %L, ''columns'', %L::json, ''keys'', json_agg(k))::text'
      ' FROM (SELECT json_build_array(%s) AS k,'
      ' (row_number() OVER () - 1) / {CHUNK_KEYS} AS chunk FROM ONLY %s) s'
      ' GROUP BY chunk ORDER BY chunk',
      pair.root::int8,
      (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.oid = pair.root),
      (SELECT relname FROM pg_class WHERE oid = pair.root),
      pair.leaf::regclass::text, to_json(cols)::text, exprs, pair.leaf::regclass)
    LOOP
      PERFORM pg_logical_emit_message(true, '{DETACH_PREFIX}', content);
    END LOOP;
  END LOOP;
END $pgcdc$;
COMMENT ON FUNCTION public.pgcdc_detach_end() IS '{VERSION}';
CREATE EVENT TRIGGER pgcdc_detach_start ON ddl_command_start WHEN TAG IN ('ALTER TABLE')
  EXECUTE FUNCTION public.pgcdc_detach_start();
CREATE EVENT TRIGGER pgcdc_detach_end ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
  EXECUTE FUNCTION public.pgcdc_detach_end();
COMMIT;"""


def remove_sql() -> str:
    """The SQL removing them (a superuser; the table owner's DETACHes are unaffected)."""
    return ("DROP EVENT TRIGGER IF EXISTS pgcdc_detach_end; "
            "DROP EVENT TRIGGER IF EXISTS pgcdc_detach_start; "
            f"DROP FUNCTION IF EXISTS {', '.join(_FUNCTIONS)};")


_INSTALLED = """\
SELECT count(*) FILTER (WHERE e.evtenabled <> 'D'),
       bool_or(obj_description(e.evtfoid, 'pg_proc') = %s)
FROM pg_catalog.pg_event_trigger e
WHERE e.evtname = ANY (%s)"""


def installed(conn: psycopg.Connection[tuple]) -> bool:  # type: ignore[type-arg]
    """Whether this version's event triggers are present and enabled."""
    row = conn.execute(_INSTALLED, (VERSION, list(_TRIGGERS))).fetchone()
    return row is not None and row[0] == len(_TRIGGERS) and bool(row[1])


def ensure_detach_trigger(conn: psycopg.Connection[tuple], *,  # type: ignore[type-arg]
                          read_only: bool = False) -> str:
    """Install (re-create) the event triggers when the role is a superuser, else check a DBA
    installed this version; a `ConfigError` naming what to run when neither. `read_only` (a
    standby): only the check. Returns what was done, for the log."""
    if installed(conn) and (read_only or not _is_superuser(conn)):
        return "present"
    if read_only:
        raise ConfigError("detach_deletes: the event triggers are not installed on the primary "
                          "(run pgcdc there once as a superuser, or have a superuser run the "
                          "SQL of `pgcdc grants --detach-deletes-sql`), or set detach_deletes: "
                          "false")
    if not _is_superuser(conn):
        raise ConfigError(f"detach_deletes needs event triggers, which only a superuser may "
                          f"create, and role {conn.info.user} is not one: have a superuser run "
                          f"the SQL `pgcdc grants --detach-deletes-sql` prints (functions "
                          f"{', '.join(_FUNCTIONS)}, event triggers {', '.join(_TRIGGERS)}), "
                          f"or set detach_deletes: false")
    try:
        conn.execute(install_sql())  # its own BEGIN ... COMMIT
    except psycopg.Error as exc:
        raise ConfigError(f"detach_deletes: installing the event triggers failed: "
                          f"{first_line(exc)}") from None
    return "installed"


def _is_superuser(conn: psycopg.Connection[tuple]) -> bool:  # type: ignore[type-arg]
    row = conn.execute("SELECT rolsuper FROM pg_catalog.pg_roles "
                       "WHERE rolname = current_user").fetchone()
    return bool(row and row[0])
