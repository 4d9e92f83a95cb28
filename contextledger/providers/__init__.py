"""Provider wire formats: request encoding, usage decoding, error classification, and the
HTTP client that sends requests."""

from contextledger.providers.base import EncodedRequest, WireFormat
from contextledger.providers.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
    ProviderTransportError,
)
from contextledger.providers.registry import WIRE_FORMATS, UnknownWireFormat, wire_format

__all__ = [
    "WIRE_FORMATS",
    "ContextOverflowError",
    "EncodedRequest",
    "ProviderAuthError",
    "ProviderError",
    "ProviderTransportError",
    "UnknownWireFormat",
    "WireFormat",
    "wire_format",
]
