"""Every test starts with structlog as the library leaves it by default, whatever an earlier
test's CLI run configured (the CLI sets the level per command). Hypothesis gives no example
a deadline: speed is measured in the benchmarks, and a loaded machine must not fail a test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

settings.register_profile("contextledger", deadline=None)
settings.load_profile("contextledger")


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()
