"""What the loopback model answers: a script of replies, played once per conversation.

A ``Script`` is the model's side of a tool loop: each ``Reply`` is one model step (text, tool
calls), and each ``ToolCall`` names the output the client is expected to send back for it.
Every conversation (the key a request carries: Anthropic ``metadata.user_id``, OpenAI
``prompt_cache_key``, else ``""``) plays its script from the start with its own cursor, so
concurrent sessions each get the same deterministic answers.

A request takes the next step, with two exceptions that keep the cursor where it is: when the
request may not call tools (no tools, tool choice ``none``, or a summary request: its
instruction asks for text only) and the next step calls tools, it gets ``tools_off``; once the
steps are used up, every request gets ``final``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

#: What a request that may not call tools gets instead of a step that calls them: summary
#: requests ask for this shape (the section titles of the compaction template).
DEFAULT_TOOLS_OFF_TEXT: Final = (
    "## Goal\n- Finish the scripted task.\n\n## Progress\n- The scripted steps so far ran."
)
#: The answer once a conversation has used up its steps.
DEFAULT_FINAL_TEXT: Final = "All scripted steps are done."


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the model makes: the tool's ``name`` and ``input``, and the ``output`` the
    client is expected to send back as its result (None: not checked)."""

    name: str
    input: dict[str, Any] = {}
    output: str | None = None


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """One model step: its ``text`` and ``tool_calls`` (text first, as models write them).
    ``output_tokens`` is what usage reports; None counts the answer's content JSON at four
    characters per token."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    output_tokens: int | None = None


class Script(msgspec.Struct, frozen=True, kw_only=True):
    """The steps one conversation plays, in order (see the module docstring).

    With ``check_outputs`` the request after a step that called tools must carry, for each
    call whose ``output`` is set, exactly that output as its result (the text blocks of an
    Anthropic ``tool_result`` joined by newlines); the server rejects it otherwise with a 400
    naming the call. Requests where the calls are no longer present (compacted away) are not
    checked.
    """

    steps: tuple[Reply, ...] = ()
    final: Reply = Reply(text=DEFAULT_FINAL_TEXT)
    tools_off: Reply = Reply(text=DEFAULT_TOOLS_OFF_TEXT)
    check_outputs: bool = True


def tool_loop(
    steps: int,
    *,
    tool: str = "bash",
    output: Callable[[int], str] = lambda n: f"step {n}: ok",
    final: str = DEFAULT_FINAL_TEXT,
) -> Script:
    """A script of ``steps`` model steps, each calling ``tool`` once with ``{"command":
    "step <n>"}`` (``n`` from 1) and expecting ``output(n)`` back, then ``final`` as text."""
    replies = tuple(
        Reply(
            text=f"Running step {n}.",
            tool_calls=(ToolCall(name=tool, input={"command": f"step {n}"}, output=output(n)),),
        )
        for n in range(1, steps + 1)
    )
    return Script(steps=(*replies, Reply(text=final)), final=Reply(text=final))
