"""Wire formats by name."""

from __future__ import annotations

from contextledger.providers.anthropic import AnthropicMessages
from contextledger.providers.base import WireFormat
from contextledger.providers.bedrock import BedrockConverse
from contextledger.providers.gemini import GeminiGenerateContent
from contextledger.providers.openai_chat import OpenAIChat
from contextledger.providers.openai_compatible import OpenAICompatible
from contextledger.providers.openai_responses import OpenAIResponses
from contextledger.providers.openrouter import OpenRouter

WIRE_FORMATS: dict[str, type[WireFormat]] = {
    AnthropicMessages.name: AnthropicMessages,
    OpenAIChat.name: OpenAIChat,
    OpenAIResponses.name: OpenAIResponses,
    OpenRouter.name: OpenRouter,
    OpenAICompatible.name: OpenAICompatible,
    BedrockConverse.name: BedrockConverse,
    GeminiGenerateContent.name: GeminiGenerateContent,
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
