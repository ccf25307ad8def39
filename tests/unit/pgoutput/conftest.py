"""Every pgoutput unit test runs against both reader sets: the C fast path (when built) and the
pure-Python readers, which stay the reference and the fallback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connector.pgoutput import decoder
from connector.speedups import native

READER_SETS = ["python", "native"] if native is not None else ["python"]


@pytest.fixture(scope="module", params=READER_SETS, autouse=True)
def pgoutput_readers(request: pytest.FixtureRequest) -> Iterator[str]:
    """'python': the dispatch table holds only the Python readers for the module's tests."""
    saved = dict(decoder._READERS)
    if request.param == "python":
        decoder._READERS.update(decoder.PYTHON_READERS)
    try:
        yield request.param
    finally:
        decoder._READERS.update(saved)
