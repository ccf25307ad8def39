"""The one setting choosing the C or the Python writer (connector/speedups.py): ``PGCDC_NATIVE``
auto | on | off, the older ``PGCDC_NO_NATIVE=1`` meaning off; a run asking for the extension
without it stops with one line."""

from __future__ import annotations

import logging

import pytest

from connector import speedups
from connector.cli import main
from connector.errors import ConfigError
from connector.speedups import native_setting, report

MISSING = ImportError("No module named 'connector._native'")


@pytest.mark.parametrize(("environ", "setting"), [
    ({}, "auto"),
    ({"PGCDC_NATIVE": ""}, "auto"),
    ({"PGCDC_NATIVE": " On "}, "on"),
    ({"PGCDC_NATIVE": "off"}, "off"),
    ({"PGCDC_NO_NATIVE": "1"}, "off"),
    ({"PGCDC_NO_NATIVE": "0"}, "auto"),
    ({"PGCDC_NATIVE": "on", "PGCDC_NO_NATIVE": "1"}, "on"),
    ({"PGCDC_NATIVE": "fast"}, "fast"),
])
def test_the_setting_read_from_the_environment(environ: dict[str, str], setting: str) -> None:
    assert native_setting(environ) == setting


def test_which_writer_runs_is_reported() -> None:
    assert report("auto", True, None) == (
        logging.DEBUG, "C extension connector._native in use (PGCDC_NATIVE=auto)")
    assert report("off", False, None) == (
        logging.DEBUG, "pure-Python implementations in use (PGCDC_NATIVE=off)")
    level, message = report("auto", False, MISSING)
    assert level == logging.WARNING and "pure-Python implementations in use" in message


@pytest.mark.parametrize("setting", ["on", "fast"])
def test_asking_for_what_cannot_run_is_an_error(setting: str) -> None:
    with pytest.raises(ConfigError, match=f"PGCDC_NATIVE={setting}|PGCDC_NATIVE='{setting}'"):
        report(setting, False, MISSING)


def test_a_run_asking_for_a_missing_extension_stops_with_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(speedups, "_SETTING", "on")
    monkeypatch.setattr(speedups, "native", None)
    monkeypatch.setattr(speedups, "_import_error", MISSING)
    assert main(["run", "--dsn", "host=db", "--bootstrap-servers", "k:9092",
                 "--schema-registry-url", "http://r"]) == 1
    error = capsys.readouterr().err
    assert error == ("pgcdc run: PGCDC_NATIVE=on but connector._native cannot be imported "
                     "(No module named 'connector._native'): install a C compiler and run "
                     "`make native`, or set PGCDC_NATIVE=auto\n")
    # a configuration error comes first, and alone: nothing is logged before it
    assert main(["run"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("pgcdc run: ") and "NATIVE" not in error
