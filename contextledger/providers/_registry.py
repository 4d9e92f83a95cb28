"""Wire formats by name."""

from __future__ import annotations

from contextledger.providers._anthropic import AnthropicMessages
from contextledger.providers._base import WireFormat
from contextledger.providers._bedrock import BedrockConverse
from contextledger.providers._gemini import GeminiGenerateContent
from contextledger.providers._openai_chat import OpenAIChat
from contextledger.providers._openai_compatible import OpenAICompatible
from contextledger.providers._openai_responses import OpenAIResponses
from contextledger.providers._openrouter import OpenRouter

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
