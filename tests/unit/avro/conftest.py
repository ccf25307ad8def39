"""Every Avro unit test runs against both writers: the C one (when built) and the Python one
(hand-written per-type encoders, fastavro for the rest), which stays the reference and the
fallback -- the same as ``PGCDC_NATIVE=off`` or a build without a C compiler.

A codec picks its writer when it is built, so the "python" run hides the extension from the
modules that look it up while its tests build their codecs. A test module that compares the two
writers itself (test_native_rows.py) sets ``COMPARES_BOTH_WRITERS = True`` and runs once.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

import pytest

import connector.avro
from connector.speedups import native

WRITERS = ["python", "native"] if native is not None else ["python"]
# Every connector.avro module that looks up the extension (each builds part of a codec's C
# path), found rather than listed so that a new one cannot be missed.
_USERS = tuple(module for info in pkgutil.iter_modules(connector.avro.__path__)
               if hasattr(module := importlib.import_module(f"connector.avro.{info.name}"),
                          "native"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "avro_writer" in metafunc.fixturenames:
        both = getattr(metafunc.module, "COMPARES_BOTH_WRITERS", False)
        metafunc.parametrize("avro_writer", WRITERS[-1:] if both else WRITERS, indirect=True,
                             scope="module")


@pytest.fixture(autouse=True, scope="module")
def avro_writer(request: pytest.FixtureRequest) -> Iterator[str]:
    """'python': codecs built in the module's tests have neither the C envelope nor C rows."""
    saved = [module.native for module in _USERS]
    if request.param == "python":
        for module in _USERS:
            module.native = None  # type: ignore[attr-defined]
    try:
        yield request.param
    finally:
        for module, value in zip(_USERS, saved, strict=True):
            module.native = value  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _fresh_fallback_warnings() -> Iterator[None]:
    """The fallback rule warns once per column per process: each test starts afresh."""
    from connector.avro import fallback

    fallback._warned.clear()
    yield
    fallback._warned.clear()
