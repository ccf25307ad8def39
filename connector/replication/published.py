"""What a publication pgcdc creates or extends publishes of each table: column lists and row
filters (PostgreSQL 15+), and stored generated columns (PostgreSQL 18). Pure: no IO.

The settings come from ``table_settings`` in pgcdc.yaml (`parse_table_settings`): a mapping
from ``schema.table`` patterns (as in ``--tables``; first matching pattern wins) to
``{columns: [...], where: "..."}``. They are written into the publication's table list
(``CREATE/ALTER PUBLICATION p TABLE t (a, b) WHERE (...)``: `table_entry`) and checked first
(`refusals`) against what PostgreSQL would refuse, but only later, when the application's
UPDATE or DELETE fails:

* a column list must hold every replica identity column (the key; every column for REPLICA
  IDENTITY FULL): "Column list used by the publication does not cover the replica identity";
* a row filter of a publication that publishes UPDATE or DELETE may use only replica identity
  columns: "Column used in the publication WHERE expression is not part of the replica
  identity".

The columns a filter uses are found by `filter_columns`, a light tokenizer (string literals and
comments skipped; a name followed by ``(`` is a function, one followed by a string literal a
type name): a name that is both a column of the table and a function or type (a column ``date``
in ``date '2026-01-01'``) is not counted, which errs towards PostgreSQL's own check at UPDATE
time, never towards a false refusal.

A setting's ``mask`` (connector/avro/masking.py) is applied by the producer, except
``exclude``: an excluded column is taken out of the column list (`with_exclusions`), so the
server never sends it; excluding a replica identity column is refused like a list without it.

With ``create_publication: false`` pgcdc sets nothing: it follows the column lists and filters of
the user's publication (``pg_publication_tables.attnames``/``rowfilter``), as the snapshots do.
Masks are then allowed alone (`sets_publication_lists`: no ``columns``/``where``): ``null``,
``hash`` and ``truncate`` are applied by the producer to the values whatever publishes them;
``exclude`` is a column list, which pgcdc does not set on a publication it does not manage, so
the user's column list must already leave the column out. `user_publication_refusals` checks
that at start, in one line naming the statements that would make it so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from connector.avro.masking import MaskRule, parse_mask
from connector.errors import ConfigError
from connector.names import pattern_matches

__all__ = ["TableSetting", "filter_columns", "normalized_filter", "parse_table_settings",
           "refusals", "sets_publication", "sets_publication_lists", "setting_for",
           "table_entry", "user_publication_refusals", "with_exclusions"]

# `outbox` is not the publication's: connector/outbox.py reads it (the table is published whole).
_SETTING_KEYS = ("columns", "where", "mask", "outbox")


@dataclass(frozen=True)
class TableSetting:
    """What to publish of the tables a pattern matches: `columns` (None: all) and `where` (None:
    every row)."""

    pattern: str
    columns: tuple[str, ...] | None = None
    where: str | None = None
    # column -> mask (connector/avro/masking.py); `exclude` ones shorten the column list
    mask: tuple[tuple[str, MaskRule], ...] = ()

    @property
    def excluded(self) -> tuple[str, ...]:
        return tuple(c for c, rule in self.mask if rule.kind == "exclude")


def parse_table_settings(raw: Mapping[str, Any]) -> list[TableSetting]:
    """``table_settings`` of pgcdc.yaml -> settings in file order; a malformed one is one line."""
    out = []
    for pattern, value in raw.items():
        where = f"table_settings: {pattern!r}"
        if not isinstance(pattern, str) or not pattern.strip():
            raise ConfigError(f"table_settings: a key must be a 'schema.table' pattern, not "
                              f"{pattern!r}")
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping with columns and/or where, got "
                              f"{value!r}")
        unknown = sorted(set(value) - set(_SETTING_KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))} (known: "
                              f"{', '.join(_SETTING_KEYS)})")
        columns = value.get("columns")
        if columns is not None:
            if not isinstance(columns, list) or not columns or \
                    not all(isinstance(c, str) and c for c in columns):
                raise ConfigError(f"{where}: columns must be a non-empty list of column names, "
                                  f"not {columns!r}")
            if len(set(columns)) != len(columns):
                raise ConfigError(f"{where}: columns names a column twice: {columns!r}")
        filt = value.get("where")
        if filt is not None and (not isinstance(filt, str) or not filt.strip()):
            raise ConfigError(f"{where}: where must be a SQL boolean expression (a string), "
                              f"not {filt!r}")
        if filt is not None and ";" in _strip_literals(filt):
            raise ConfigError(f"{where}: where must be one expression (no ';'): {filt!r}")
        mask = parse_mask(where, value["mask"]) if "mask" in value else {}
        out.append(TableSetting(pattern.strip(), tuple(columns) if columns else None,
                                filt.strip() if filt else None, tuple(mask.items())))
    return out


def sets_publication(settings: Sequence[TableSetting]) -> bool:
    """Whether any setting gives a table a column list, a row filter or masks (settings with
    none, such as an outbox's alone, need no PostgreSQL 15 and no publication pgcdc manages).
    Masks count: `exclude` is a column list, and the others are checked against it."""
    return any(s.columns is not None or s.where is not None or s.mask for s in settings)


def sets_publication_lists(settings: Sequence[TableSetting]) -> bool:
    """Whether any setting gives a table a column list or a row filter: what only a
    publication pgcdc creates or extends can carry (masks alone are applied by the producer)."""
    return any(s.columns is not None or s.where is not None for s in settings)


def setting_for(settings: Sequence[TableSetting], schema: str, table: str
                ) -> TableSetting | None:
    """The first setting whose pattern (no schema: ``public``) matches the table."""
    for setting in settings:
        if pattern_matches(setting.pattern, schema, table):
            return setting
    return None


def with_exclusions(setting: TableSetting | None, table_columns: Sequence[str]
                    ) -> TableSetting | None:
    """`setting` with its excluded columns taken out of its column list (all of
    `table_columns`, the table's live columns, when it has none): exclusion is a column list,
    so PostgreSQL never sends those columns."""
    if setting is None or not setting.excluded:
        return setting
    listed = setting.columns if setting.columns is not None else tuple(table_columns)
    return TableSetting(setting.pattern, tuple(c for c in listed if c not in setting.excluded),
                        setting.where, setting.mask)


def table_entry(schema: str, table: str, setting: TableSetting | None) -> sql.Composed:
    """One table of a publication's table list: ``"s"."t" ("a", "b") WHERE (<filter>)``."""
    parts: list[sql.Composable] = [sql.Identifier(schema, table)]
    if setting is not None and setting.columns:
        parts.append(sql.SQL(" ({})").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in setting.columns)))
    if setting is not None and setting.where:
        parts.append(sql.SQL(" WHERE ({})").format(sql.SQL(setting.where)))
    return sql.Composed(parts)


_LITERAL = re.compile(r"""[EeBbXxUu]?&?'(?:[^']|'')*'|\$([A-Za-z_]*)\$.*?\$\1\$|--[^\n]*"""
                      r"""|/\*.*?\*/""", re.S)
# A ``::type`` cast as pg_get_expr writes it (multi-word type names first).
_CAST = re.compile(r"::\s*(?:character varying|double precision|bit varying|"
                   r"(?:timestamp|time) with(?:out)? time zone|\"[^\"]+\"|"
                   r"[A-Za-z_][A-Za-z0-9_.]*)(?:\(\d+(?:,\d+)?\))?(?:\[\])*")
_TOKEN = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*)|(\S)')


def _strip_literals(text: str) -> str:
    """`text` with string literals and comments replaced by a placeholder ``'?'``."""
    return _LITERAL.sub("'?'", text)


def filter_columns(expression: str, columns: Sequence[str]) -> list[str]:
    """The columns among `columns` that the row filter `expression` uses, in first-use order."""
    tokens = [(m.group(1).replace('""', '"') if m.group(1) is not None else None,
               m.group(2), m.group(3)) for m in _TOKEN.finditer(_strip_literals(expression))]
    known = set(columns)
    used: list[str] = []
    for i, (quoted, bare, _other) in enumerate(tokens):
        if quoted is None and bare is None:
            continue
        name = quoted if quoted is not None else str(bare).lower()
        following = tokens[i + 1][2] if i + 1 < len(tokens) else None
        if following == "(" or following == "'":  # a function call, a typed literal
            continue
        if i > 0 and tokens[i - 1][2] == ".":  # s.func / a qualified type: not a column
            continue
        if name in known and name not in used:
            used.append(name)
    return used


def refusals(schema: str, table: str, setting: TableSetting, columns: Sequence[str],
             identity: Sequence[str], generated: Sequence[str], *,
             publishes_update_or_delete: bool, generated_allowed: bool) -> list[str]:
    """Why PostgreSQL would refuse `setting` on the table (or its application's UPDATE and
    DELETE afterwards), one line each; empty: it may be set. `columns`: the table's live
    columns; `identity`: its replica identity columns (all of them for FULL; none for NOTHING);
    `generated`: its generated columns; `generated_allowed`: the server publishes generated
    columns (18+)."""
    name = f"{schema}.{table}"
    found = _mask_refusals(name, setting, columns, identity)
    if setting.columns is not None:
        unlisted = [c for c, rule in setting.mask if rule.kind != "exclude"
                    and c in columns and c not in setting.columns]
        if unlisted:
            found.append(f"table_settings {setting.pattern!r}: mask names column(s) "
                         f"{', '.join(unlisted)} of {name} that its columns list leaves out "
                         "(not published): drop them from mask")
    if setting.columns is not None:
        missing = [c for c in setting.columns if c not in columns]
        if missing:
            found.append(f"table_settings {setting.pattern!r}: {name} has no column(s) "
                         f"{', '.join(missing)}")
        uncovered = [c for c in identity if c not in setting.columns]
        if uncovered:
            found.append(f"table_settings {setting.pattern!r}: the column list of {name} must "
                         f"hold its replica identity (key) column(s) {', '.join(uncovered)}, or "
                         "PostgreSQL rejects UPDATE and DELETE on it")
        gen = [c for c in setting.columns if c in generated]
        if gen and not generated_allowed:
            found.append(f"table_settings {setting.pattern!r}: generated column(s) "
                         f"{', '.join(gen)} of {name} can be published only by PostgreSQL 18+")
    if setting.where is not None and publishes_update_or_delete:
        outside = [c for c in filter_columns(setting.where, columns) if c not in identity]
        if outside:
            found.append(f"table_settings {setting.pattern!r}: the filter of {name} uses "
                         f"{', '.join(outside)}, outside its replica identity "
                         f"({', '.join(identity) or 'none'}): PostgreSQL would reject UPDATE "
                         "and DELETE on it; filter on key columns only, or set REPLICA "
                         "IDENTITY FULL on the table")
    return found


def user_publication_refusals(publication: str, schema: str, table: str,
                              setting: TableSetting, columns: Sequence[str],
                              identity: Sequence[str], published: Sequence[str] | None,
                              where: str | None, *, listed: bool) -> list[str]:
    """Why `setting`'s masks cannot hold on a table of the user's publication (``create_
    publication: false``), one line each; empty: they hold. `columns`: the table's live
    columns; `identity`: its replica identity columns; `published`: the columns the publication
    sends (None: all of them, no column list); `where`: its row filter; `listed`: the table is
    in the publication's table list (not published by FOR ALL TABLES or TABLES IN SCHEMA).

    null, hash and truncate masks need a published column to mask (a mask of a column that is
    not sent would fail when the schema is derived). exclude needs the column left out of the
    publication's column list: pgcdc never changes a publication it does not manage, and the
    server would otherwise send the clear value."""
    name = f"{schema}.{table}"
    sent = list(columns) if published is None else list(published)
    found = _mask_refusals(name, setting, columns, identity)
    unsent = [c for c, rule in setting.mask if rule.kind != "exclude" and c in columns
              and c not in sent]
    if unsent:
        found.append(f"table_settings {setting.pattern!r}: mask names column(s) "
                     f"{', '.join(unsent)} of {name} that publication {publication} does not "
                     "publish: drop them from mask")
    leaking = [c for c in setting.excluded if c in sent and c not in identity]
    if leaking:
        keep = [c for c in sent if c not in setting.excluded]
        entry = table_entry(schema, table, TableSetting(setting.pattern, tuple(keep), where)
                            ).as_string(None)
        pub = sql.Identifier(publication).as_string(None)
        how = (f"remove them from its column list in one transaction: BEGIN; ALTER "
               f"PUBLICATION {pub} DROP TABLE {sql.Identifier(schema, table).as_string(None)};"
               f" ALTER PUBLICATION {pub} ADD TABLE {entry}; COMMIT" if listed else
               f"publish {name} from a table list with a column list without them (... TABLE "
               f"{entry})")
        found.append(f"table_settings {setting.pattern!r}: mask excludes column(s) "
                     f"{', '.join(leaking)} of {name}, which publication {publication} "
                     f"publishes (with create_publication false pgcdc does not change it): "
                     f"{how}, or mask them with null instead")
    return found


def _mask_refusals(name: str, setting: TableSetting, columns: Sequence[str],
                   identity: Sequence[str]) -> list[str]:
    """Masks refused whoever made the publication: one naming a column the table lacks (a
    typo must not publish a value in clear), one excluding a key column."""
    found = []
    unknown = [c for c, _ in setting.mask if c not in columns]
    if unknown:
        found.append(f"table_settings {setting.pattern!r}: mask names column(s) "
                     f"{', '.join(unknown)} that {name} does not have")
    keys = [c for c in setting.excluded if c in identity]
    if keys:
        found.append(f"table_settings {setting.pattern!r}: cannot exclude replica identity "
                     f"(key) column(s) {', '.join(keys)} of {name}: events are keyed by them; "
                     "mask them with hash instead")
    return found


def normalized_filter(expression: str | None) -> str | None:
    """A row filter without what PostgreSQL's deparsing adds or drops (parentheses, spaces,
    ``::type`` casts, case outside literals), to tell whether the publication's filter
    (``pg_get_expr``) is the one configured. Unequal forms of one filter only cost a needless
    re-set of the table in the publication."""
    if expression is None:
        return None
    literals: list[str] = []

    def keep(m: re.Match[str]) -> str:
        literals.append(m.group(0))
        return f"\x00{len(literals) - 1}\x00"

    text = _LITERAL.sub(keep, expression)
    text = _CAST.sub("", text)
    text = re.sub(r"[\s()]", "", text).lower().replace('"', "")
    return re.sub("\x00(\\d+)\x00", lambda m: literals[int(m.group(1))], text)
