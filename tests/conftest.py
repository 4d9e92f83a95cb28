"""Every test starts with structlog as the library leaves it by default, whatever an earlier
test's CLI run configured (the CLI sets the level per command)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()
