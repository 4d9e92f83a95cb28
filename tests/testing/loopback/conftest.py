from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest


def loopback_threads() -> list[threading.Thread]:
    """The threads of loopback providers still running."""
    return [t for t in threading.enumerate() if t.name.startswith("loopback-provider")]


@pytest.fixture(scope="module", autouse=True)
def _no_server_outlives_its_module() -> Iterator[None]:
    yield
    assert loopback_threads() == []
