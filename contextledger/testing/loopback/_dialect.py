"""What the loopback provider needs from each API it speaks: a ``Dialect``.

A dialect reads a request body into a ``ParsedRequest`` (or rejects it with an ``ApiError``,
as the real API would), checks it against the model's limits, and renders answers and errors
in the API's own JSON shape. The core (``_core.py``) holds the rules common to both APIs: the
script, the faults, the prompt cache.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import msgspec

from contextledger.cachesim import Block, RequestCost, SimRequest
from contextledger.compaction import SUMMARY_OPENING
from contextledger.prices._tables import Family
from contextledger.testing.loopback._faults import Fault
from contextledger.testing.loopback._script import ToolCall
from contextledger.vocabulary._models import Model

Stop = Literal["tool_use", "end_turn", "max_tokens"]


def asks_for_summary(body: Mapping[str, Any]) -> bool:
    """Whether an Anthropic Messages or OpenAI Chat Completions request body is a model
    summarizer's: its last message's last text opens with the summary instruction's
    ``SUMMARY_OPENING`` (its tool choice is the session's, so it does not tell)."""
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, Mapping) else None
    if isinstance(content, list) and content and isinstance(content[-1], Mapping):
        content = content[-1].get("text")
    return isinstance(content, str) and content.startswith(SUMMARY_OPENING)


class ApiError(msgspec.Struct, frozen=True, kw_only=True):
    """A rejection: the HTTP ``status``, the API's error ``type``, its ``message``, OpenAI's
    ``code`` and ``param``, and extra response ``headers``."""

    status: int
    type: str
    message: str
    code: str | None = None
    param: str | None = None
    headers: dict[str, str] = {}


class ToolUse(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call in the request's history."""

    id: str
    name: str
    input: Any


class ToolResultText(msgspec.Struct, frozen=True, kw_only=True):
    """A tool result in the request: the call it answers and its text."""

    tool_use_id: str
    text: str


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """Consecutive messages of one side (``user`` holds tool results too), with the tool
    calls and results they carry."""

    role: Literal["user", "assistant"]
    tool_uses: tuple[ToolUse, ...] = ()
    tool_results: tuple[ToolResultText, ...] = ()


class ParsedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A valid request as the core needs it: the model, the output cap (None when the
    request sets none), the conversation key, whether the model may call tools (tools sent,
    tool choice not ``none``, and no summary asked for: ``asks_for_summary``), whether a
    stream was asked for, the turns and the prompt blocks (for the window and the cache),
    with the tool choice and the count of tool and system blocks the cache keys messages by
    (``SimRequest``; Anthropic's only)."""

    model: str
    max_tokens: int | None
    conversation: str
    tools_allowed: bool
    stream: bool
    turns: tuple[Turn, ...]
    blocks: tuple[Block, ...]
    tool_choice: str | None = None
    prefix_blocks: int = 0

    def sim_request(self, at: float = 0.0) -> SimRequest:
        """The request as the cache simulator takes it, sent at ``at`` seconds."""
        return SimRequest(
            blocks=self.blocks,
            at=at,
            tool_choice=self.tool_choice,
            prefix_blocks=self.prefix_blocks,
            model=self.model,
        )

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token the model reads (``SimRequest.prompt_tokens``: the thinking
        of earlier turns a model drops is not read)."""
        return self.sim_request().prompt_tokens


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """A successful answer to render: ids, the model, the reply's text and calls (with the
    ids issued for them), why it stopped, the prompt's cache figures and the output tokens."""

    message_id: str
    model: str
    text: str
    calls: tuple[tuple[str, ToolCall], ...]
    stop: Stop
    cost: RequestCost
    output_tokens: int
    created: int


class Dialect(ABC):
    """One API: its path, its cache rules' family and its shapes."""

    #: The API's name, as the wire formats name it.
    api: ClassVar[str]
    #: The URL path it is served at.
    path: ClassVar[str]
    #: The prompt-cache rules its requests are charged by.
    family: ClassVar[Family]
    #: The response header carrying the request id.
    request_id_header: ClassVar[str]

    @abstractmethod
    def conversation(self, body: Any) -> str:
        """The conversation key of a body (``""`` when it carries none)."""

    @abstractmethod
    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> ApiError | None:
        """The 401 for a request without a key, or with another key than ``api_key``."""

    @abstractmethod
    def read(self, body: Any, *, require_user_first: bool) -> ParsedRequest | ApiError:
        """The request, or the error the API answers a malformed or invalid one with."""

    @abstractmethod
    def limits(self, request: ParsedRequest, model: Model) -> ApiError | None:
        """The error when the output cap is above the model's or the prompt (with the cap)
        does not fit the model's window."""

    @abstractmethod
    def unknown_model(self, model: str) -> ApiError:
        """The 404 for a model the server does not serve."""

    @abstractmethod
    def invalid(self, message: str, *, status: int = 400) -> ApiError:
        """A generic invalid-request error (bad JSON, unsupported options, script
        mismatches)."""

    @abstractmethod
    def fault(self, fault: Fault, prompt_tokens: int, window: int) -> ApiError:
        """The error answer of a fault (not ``dropped`` or ``hang``, which have none)."""

    @abstractmethod
    def error_body(self, error: ApiError, request_id: str) -> dict[str, Any]:
        """The JSON body of an error answer."""

    @abstractmethod
    def answer_body(self, answer: Answer) -> dict[str, Any]:
        """The JSON body of a successful answer, its usage in the API's shape."""

    @abstractmethod
    def tool_id(self, n: int) -> str:
        """The id of the ``n``-th tool call the server issues."""

    @abstractmethod
    def message_id(self, n: int) -> str:
        """The id of the ``n``-th answer."""

    def request_id(self, n: int) -> str:
        """The id of the ``n``-th request received."""
        return f"req_loopback_{n:06d}"


def text_of(content: Any) -> str:
    """The text of a tool result's content: a string, or its text blocks joined by
    newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return ""


def merged(turns: list[Turn]) -> tuple[Turn, ...]:
    """Consecutive turns of one role as one (as the APIs combine consecutive messages)."""
    out: list[Turn] = []
    for turn in turns:
        if out and out[-1].role == turn.role:
            last = out[-1]
            out[-1] = Turn(
                role=turn.role,
                tool_uses=(*last.tool_uses, *turn.tool_uses),
                tool_results=(*last.tool_results, *turn.tool_results),
            )
        else:
            out.append(turn)
    return tuple(out)
