"""Wire formats by name."""

from __future__ import annotations

from contextledger.providers.anthropic import AnthropicMessages
from contextledger.providers.base import WireFormat

WIRE_FORMATS: dict[str, type[WireFormat]] = {
    AnthropicMessages.name: AnthropicMessages,
}


class UnknownWireFormat(ValueError):
    """No wire format has this name."""


def wire_format(name: str) -> WireFormat:
    """A new instance of the wire format called ``name``."""
    try:
        return WIRE_FORMATS[name]()
    except KeyError:
        known = ", ".join(sorted(WIRE_FORMATS))
        raise UnknownWireFormat(f"unknown wire format {name!r} (known: {known})") from None
