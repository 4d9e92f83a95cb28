"""The provider-neutral messages a model view is made of.

A view is a list of ``ModelMessage``: ``user`` messages (text, files), ``assistant`` messages
(text, reasoning, tool calls) and ``tool`` messages (the results of the calls of the assistant
message just before). Provider encoders turn these into wire formats. Each message names the
history message it came from (``source_id``), so a view can be memoised and diffed per source
message version.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class ModelText(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="text"):
    """Text. ``synthetic`` text was written by the runtime (placeholders, reminders)."""

    text: str
    synthetic: bool = False


class ModelReasoning(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="reasoning"):
    """Reasoning sent back to the model that produced it, with its provider metadata."""

    text: str
    provider_metadata: dict[str, Any] = {}

    def signature(self, *providers: str) -> str:
        """The first signature under ``providers``' metadata (``provider_metadata[p]
        ["signature"]``), "" when none carries one."""
        for provider in providers:
            meta = self.provider_metadata.get(provider)
            if isinstance(meta, dict) and meta.get("signature"):
                return str(meta["signature"])
        return ""

    @property
    def redacted_data(self) -> str:
        """The data of Anthropic's redacted thinking (``redactedData``, where the importers
        keep it), "" for none."""
        meta = self.provider_metadata.get("anthropic")
        return str(meta.get("redactedData") or "") if isinstance(meta, dict) else ""

    @property
    def claude_block(self) -> bool:
        """Whether a Claude API takes it back as a thinking block: signed under Anthropic's or
        Bedrock's metadata, or redacted (Anthropic's API alone takes the latter, Bedrock's
        either signature, Anthropic's only its own); unsigned reasoning is left out."""
        return bool(self.signature("anthropic", "bedrock") or self.redacted_data)


class ModelFile(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="file"):
    """A file or media attachment."""

    mime: str
    url: str
    filename: str | None = None


class ModelToolCall(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="tool-call"):
    """A tool call made by the assistant."""

    call_id: str
    tool: str
    input: dict[str, Any] = {}
    provider_executed: bool = False
    provider_metadata: dict[str, Any] = {}


class ModelToolResult(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="tool-result"
):
    """The result of one tool call; ``is_error`` results carry the error text as output."""

    call_id: str
    tool: str
    output: str
    is_error: bool = False
    attachments: tuple[ModelFile, ...] = ()


ModelContent = ModelText | ModelReasoning | ModelFile | ModelToolCall | ModelToolResult
ModelRole = Literal["user", "assistant", "tool"]


class ModelMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a model view. ``source_id`` is the history message it was built from."""

    role: ModelRole
    content: tuple[ModelContent, ...]
    source_id: str
    synthetic: bool = False
