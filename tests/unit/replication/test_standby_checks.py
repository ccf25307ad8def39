"""The start-up checks of capture from a standby (connector/replication/standby.py): each
refusal and warning is one line naming the setting and the fix; the heartbeat DSN's primary is
checked; PostgreSQL's refusals are said as the fix; `--heartbeat-dsn` is configured like the
DSN (flag, YAML key, secrets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.cli import build_parser
from connector.config import load
from connector.errors import ConfigError
from connector.replication.standby import (
    SLOT_WAIT,
    StandbyFacts,
    primary_refusals,
    publication_refusal,
    slot_refusal,
    standby_refusals,
    standby_warnings,
)
from connector.tools.run import config_from_args

GOOD = StandbyFacts(major=18, hot_standby_feedback=True, primary_slot_name="pgcdc_standby")


def one_line(text: str) -> str:
    assert "\n" not in text
    return text


def test_a_well_set_standby_passes() -> None:
    assert standby_refusals(GOOD) == []
    assert standby_warnings(GOOD) == []
    assert standby_refusals(StandbyFacts(16, True, "s")) == []


def test_what_a_standby_lacks_is_said_one_line_each() -> None:
    [old] = standby_refusals(StandbyFacts(15, True, "s"))
    assert "PostgreSQL 16+" in one_line(old) and "15" in old
    [feedback] = standby_refusals(StandbyFacts(18, False, "s"))
    assert "hot_standby_feedback = on" in one_line(feedback) and "invalidate" in feedback
    assert len(standby_refusals(StandbyFacts(14, False, ""))) == 2
    [slotless] = standby_warnings(StandbyFacts(18, True, ""))
    assert "primary_slot_name" in one_line(slotless)
    assert "pg_create_physical_replication_slot" in slotless


def test_the_heartbeat_primary_is_checked() -> None:
    assert primary_refusals("logical", 7, 7) == []
    assert primary_refusals("logical", None, 7) == []  # identifier not readable: not judged
    [level] = primary_refusals("replica", 7, 7)
    assert "wal_level = logical" in one_line(level) and "'replica'" in level
    [other] = primary_refusals("logical", 8, 7)
    assert "another cluster" in one_line(other) and "--heartbeat-dsn" in other


def test_postgresql_refusal_of_a_standby_slot_becomes_the_fix() -> None:
    for detail in ('logical decoding on standby requires "wal_level" >= "logical" on the '
                   'primary', "logical decoding on standby requires wal_level >= logical on "
                   "the primary"):
        refusal = slot_refusal(detail)
        assert refusal is not None and "primary's postgresql.conf" in one_line(refusal)
    assert slot_refusal("replication slot \"x\" already exists") is None


def test_the_slot_wait_names_what_to_run_on_the_primary() -> None:
    line = one_line(SLOT_WAIT.format(slot="s1"))
    assert "s1" in line and "SELECT pg_log_standby_snapshot()" in line and "primary" in line


def test_a_publication_refusal_names_the_statements() -> None:
    line = one_line(publication_refusal("p", "does not exist",
                                        ['CREATE PUBLICATION "p" FOR TABLE "s"."t"']))
    assert "run on the primary: CREATE PUBLICATION \"p\" FOR TABLE \"s\".\"t\";" in line
    assert "standby" in line


def test_heartbeat_dsn_is_configured_like_the_dsn(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("heartbeat-dsn: env:PRIMARY\n")
    cfg = load(str(config), {}, environ={"PRIMARY": "host=primary dbname=app"},
               validate=False)
    assert cfg.heartbeat_dsn == "host=primary dbname=app"
    assert load(None, {"heartbeat_dsn": "host=p"}, validate=False).heartbeat_dsn == "host=p"
    with pytest.raises(ConfigError, match="malformed dsn"):
        load(None, {"dsn": "host=s", "heartbeat_dsn": "host='unclosed"},
             validate=False).check_names()
    args = build_parser().parse_args([
        "run", "--dsn", "host=standby", "--bootstrap-servers", "k:9092",
        "--schema-registry-url", "http://r", "--heartbeat-dsn", "host=primary"])
    assert config_from_args(args).heartbeat_dsn == "host=primary"
