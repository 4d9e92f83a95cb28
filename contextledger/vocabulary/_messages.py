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

    @property
    def anthropic_block(self) -> bool:
        """Whether an Anthropic request takes it back: it carries Anthropic's signature or
        redacted data (``provider_metadata["anthropic"]``); other reasoning is left out."""
        meta = self.provider_metadata.get("anthropic")
        return isinstance(meta, dict) and bool(meta.get("signature") or meta.get("redactedData"))


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
