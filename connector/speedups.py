"""The C extension `connector._native` (sources in connector/native/), or None.

None when it was not built (no C compiler at install time: the extension is optional) or when
``PGCDC_NO_NATIVE=1`` asks for the pure-Python reference implementations, which are always
present and give the same results (tests compare the two).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["native", "NO_NATIVE_ENV"]

NO_NATIVE_ENV = "PGCDC_NO_NATIVE"


def _load() -> ModuleType | None:
    if os.environ.get(NO_NATIVE_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("connector._native")
    except ImportError:
        return None


native: ModuleType | None = _load()
