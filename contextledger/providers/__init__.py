"""Provider wire formats: request encoding, usage decoding, error classification, and the
HTTP client that sends requests."""

from contextledger.providers._base import EncodedRequest, WireFormat
from contextledger.providers._errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
    ProviderTransportError,
)
from contextledger.providers._http import ProviderClient, ProviderResponse, RetryPolicy
from contextledger.providers._registry import WIRE_FORMATS, UnknownWireFormat, wire_format

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
