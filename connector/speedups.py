"""The C extension `connector._native` (sources in connector/native/), or None.

One setting, the environment variable ``PGCDC_NATIVE``, read once at import:

* ``auto`` (or unset): the extension when it is importable, else the pure-Python reference
  implementations, which are always present and give the same results (tests compare the two);
* ``on``: the extension, required -- `announce` (as `pgcdc run` starts) fails with one line
  when it cannot be imported;
* ``off``: the pure-Python implementations (to rule the C code out, or to compare speed).

``PGCDC_NO_NATIVE=1`` is the older spelling of ``off``, still honoured when ``PGCDC_NATIVE`` is
not set. `announce` logs which implementation runs, once per run.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from types import ModuleType
from typing import Final

from connector.errors import ConfigError

__all__ = ["NATIVE_ENV", "NATIVE_SETTINGS", "NO_NATIVE_ENV", "announce", "native",
           "native_setting", "report"]

log = logging.getLogger(__name__)

NATIVE_ENV: Final = "PGCDC_NATIVE"
NO_NATIVE_ENV: Final = "PGCDC_NO_NATIVE"
NATIVE_SETTINGS: Final = ("auto", "on", "off")


def native_setting(environ: Mapping[str, str]) -> str:
    """The setting `environ` asks for: one of NATIVE_SETTINGS, or the unknown value as given
    (`announce` refuses it; meanwhile it counts as ``auto``)."""
    if environ.get(NO_NATIVE_ENV, "") not in ("", "0") and not environ.get(NATIVE_ENV):
        return "off"
    return environ.get(NATIVE_ENV, "").strip().lower() or "auto"


_SETTING: Final = native_setting(os.environ)
_import_error: ImportError | None = None


def _load() -> ModuleType | None:
    global _import_error
    if _SETTING == "off":
        return None
    try:
        return importlib.import_module("connector._native")
    except ImportError as exc:
        _import_error = exc
        return None


native: ModuleType | None = _load()


def report(setting: str, loaded: bool, error: ImportError | None) -> tuple[int, str]:
    """(logging level, message) naming which implementation runs (DEBUG when it is the one
    asked for: nothing precedes a command's own output), for `setting`, whether the
    extension was `loaded` and the `error` importing it raised; ConfigError (one line) when
    the setting is unknown or asks for the extension and it could not be imported."""
    if setting not in NATIVE_SETTINGS:
        raise ConfigError(f"{NATIVE_ENV}={setting!r}: expected one of "
                          f"{', '.join(NATIVE_SETTINGS)}")
    if loaded:
        return logging.DEBUG, f"C extension connector._native in use ({NATIVE_ENV}={setting})"
    if setting == "off":
        return logging.DEBUG, f"pure-Python implementations in use ({NATIVE_ENV}=off)"
    if setting == "on":
        raise ConfigError(f"{NATIVE_ENV}=on but connector._native cannot be imported "
                          f"({error}): install a C compiler and run `make native`, or set "
                          f"{NATIVE_ENV}=auto")
    return logging.WARNING, (f"connector._native cannot be imported ({error}): pure-Python "
                             f"implementations in use, several times slower (install a C "
                             f"compiler and run `make native`)")


def announce() -> None:
    """Once, as a run starts: log `report` of this process's setting (or raise its error)."""
    level, message = report(_SETTING, native is not None, _import_error)
    log.log(level, message)
