"""Checks every wire format must pass, shared by the per-format tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

from contextledger.events._parts import ModelRef
from contextledger.providers._base import WireFormat
from tests.providers.fixtures import golden_request

GOLDEN = Path(__file__).parent / "golden"


def check_golden(wire: type[WireFormat], model: ModelRef) -> None:
    """The fixed session's request equals the checked-in expected JSON. With
    ``CONTEXTLEDGER_UPDATE_GOLDEN=1`` the file is rewritten instead (review the diff)."""
    body = wire().encode(golden_request(model)).body
    path = GOLDEN / f"{wire.name}.json"
    if os.environ.get("CONTEXTLEDGER_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps(json.loads(body), indent=2, ensure_ascii=False) + "\n")
    assert path.exists(), f"no golden file {path}; run with CONTEXTLEDGER_UPDATE_GOLDEN=1"
    assert json.loads(body) == json.loads(path.read_text())
