"""Provider wire formats: request encoding, usage decoding, error classification, and the
HTTP client that sends requests."""

from contextledger.providers.base import EncodedRequest, WireFormat
from contextledger.providers.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
    ProviderTransportError,
)
from contextledger.providers.http import ProviderClient, ProviderResponse, RetryPolicy
from contextledger.providers.registry import WIRE_FORMATS, UnknownWireFormat, wire_format

__all__ = [
    "WIRE_FORMATS",
    "ContextOverflowError",
    "EncodedRequest",
    "ProviderAuthError",
    "ProviderClient",
    "ProviderError",
    "ProviderResponse",
    "ProviderTransportError",
    "RetryPolicy",
    "UnknownWireFormat",
    "WireFormat",
    "wire_format",
]
