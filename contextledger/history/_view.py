"""The model view: what the model is sent, as a pure function of the history.

``model_view(history, options)`` applies, in Kilo Code's order, every rule of the reference
agents (``shared/reference/opencode-kilo.md`` §2-§3):

1. ``filter_compacted``: walk newest to oldest and stop at the last completed compaction
   (after its kept tail), then reorder to: compaction prompt, summary, kept tail, newer turns.
2. ``trim_before_last_summary``: also cut before a summary that has no compaction part (a
   manual compaction of a plain user message).
3. Historical media stripping once a summary exists: by default media older than the newest
   compaction request (so it changes only when a compaction completes); Kilo Code's rule
   (before the last real user turn) on request.
4. Conversion (``convert_message``, opencode's ``toModelMessages``): ignored text dropped,
   errored assistant messages dropped unless aborted with content, reasoning of another model
   sent as text, one model message per step, cleared and soft-trimmed tool outputs, stripped
   media as a placeholder and stripped reasoning left out, long outputs cut with a paging
   hint, interrupted calls answered, media in tool results moved to a synthetic user message
   where the provider cannot take them.

Guarantee: in every view each tool call is followed, in the very next message, by exactly one
result, and every result follows its call. Calls and results live in one stored message, the
reorderings move whole messages, and a call without a result is answered with an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal

import msgspec

from contextledger.config import Config, EnvironmentMode, HistoricalMedia, ToolOutputConfig
from contextledger.events._catalogue import MAIN_AGENT, ToolStateChanged
from contextledger.events._parts import (
    CompactionPart,
    FilePart,
    ModelRef,
    Part,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolPending,
    ToolRunning,
    is_media,
)
from contextledger.history._projection import History, Message
from contextledger.history._truncate import truncate_for_view, truncate_tool_output
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._models import BEDROCK_PROVIDERS

#: What a compaction request says to the model (opencode).
COMPACTION_PROMPT: Final = "What did we do so far?"
#: What a subtask part says in a user message (opencode).
SUBTASK_PROMPT: Final = "The following tool was executed by the user"
#: A pruned tool output (opencode's placeholder; the output stays in the log).
CLEARED_OUTPUT: Final = "[Old tool result content cleared]"
#: The answer given for a call that never got a result (opencode), so no call dangles.
INTERRUPTED_OUTPUT: Final = "[Tool execution was interrupted]"
#: Heads the synthetic user message that carries media a provider cannot take in a result.
SYNTHETIC_ATTACHMENT_PROMPT: Final = "Attached media from tool result:"
#: File parts expanded into text when the prompt was written (opencode skips them).
_EXPANDED_MIMES: Final = frozenset({"text/plain", "application/x-directory"})

MediaSupport = Literal["all", "images", "none"]


class ViewOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How to build a view.

    ``model`` is the model the request is for: reasoning of other models is sent as text and
    media support in tool results follows its provider unless ``tool_media`` says otherwise.
    ``strip_media`` turns every media attachment into a text placeholder (summaries);
    ``tool_output_max_chars`` cuts tool outputs (summaries). ``environment`` decides which
    user messages carry their captured environment block: ``"each"`` (default) keeps every
    block where it was first sent, so earlier request bytes never change; ``"latest"`` is
    Kilo Code's behaviour (only the newest user message carries one). ``historical_media``
    decides which media becomes placeholders once a summary exists: ``"compaction"``
    (default) strips media older than the newest compaction request, so it changes only when
    a compaction completes; ``"latest-user"`` is Kilo Code's rule (everything before the last
    real user message, which moves with every turn and so changes bytes already sent);
    ``"keep"`` strips nothing. ``agent_id`` limits the view to one agent's slice.
    ``tool_output`` caps each tool output at a number of lines and bytes, cutting the head or
    the tail and telling the model how to page the rest with ``read_tool_output`` (the full
    output stays in the log); None sends outputs whole.
    """

    model: ModelRef | None = None
    strip_media: bool = False
    tool_output_max_chars: int | None = None
    tool_media: MediaSupport | None = None
    environment: EnvironmentMode = "each"
    historical_media: HistoricalMedia = "compaction"
    agent_id: str | None = None
    tool_output: ToolOutputConfig | None = ToolOutputConfig()

    @classmethod
    def from_config(
        cls,
        config: Config,
        model: ModelRef | None = None,
        *,
        agent_id: str = MAIN_AGENT,
        for_summary: bool = False,
    ) -> ViewOptions:
        """The options a request of ``agent_id``'s slice for ``model`` uses under ``config``:
        each agent, the main one included, is sent its own messages only (what another agent
        did reaches it as the host records it in its slice, such as a subtask's result);
        ``for_summary``: the view a compaction summarises (media as placeholders, tool outputs
        cut to ``view.summary_tool_output_chars``)."""
        return cls(
            model=model,
            agent_id=agent_id,
            tool_output=config.tool_output,
            environment=config.view.environment,
            historical_media=config.view.historical_media,
            strip_media=for_summary,
            tool_output_max_chars=config.view.summary_tool_output_chars if for_summary else None,
        )


def tool_media_support(model: ModelRef | None) -> MediaSupport:
    """Which media a provider accepts inside tool results (opencode's table)."""
    if model is None:
        return "none"
    provider = model.provider_id.lower()
    if provider in ("anthropic", "openai", "google-vertex-anthropic"):
        return "all"
    if provider in BEDROCK_PROVIDERS or provider == "xai":
        return "images"
    if provider in ("google", "gemini", "google-vertex"):
        model_id = model.model_id.lower()
        return "all" if "gemini-3" in model_id and "gemini-2" not in model_id else "none"
    return "none"


# --- history projection ---------------------------------------------------------------------


def completed_summary(message: Message) -> bool:
    """A summary assistant message that finished without error."""
    return (
        message.role == "assistant"
        and message.summary
        and message.finish is not None
        and message.error is None
        and not message.excluded
    )


def filter_compacted(messages: Sequence[Message]) -> list[Message]:
    """opencode's ``filterCompacted`` plus its reorder (§3.1).

    Walks newest to oldest, stops at the last completed compaction request (or, when it kept
    a tail, at the tail's first message), and returns chronological order reordered to:
    compaction request .. summary, then the kept tail, then everything after the summary.
    Unlike opencode, a kept tail that reaches back over an earlier compaction leaves that
    compaction's request and summary out: the newer summary already covers them.
    """
    return _filter_newest_first(reversed(messages))


def _filter_newest_first(newest_first: Iterable[Message]) -> list[Message]:
    """``filter_compacted`` of the messages ``newest_first`` yields, newest to oldest: it
    reads them only as far back as the view reaches, so a lazy iterable over a long history
    costs the view's length, not the history's."""
    kept: list[Message] = []
    completed: set[str] = set()
    tail_start: str | None = None
    for message in newest_first:
        if tail_start is not None:
            # Inside a kept tail, earlier compactions' requests and summaries are part of
            # what the newer summary replaced: skip them rather than send them twice.
            if message.id == tail_start:
                kept.append(message)
                break
            if not (message.summary or compaction_part(message) is not None):
                kept.append(message)
            continue
        kept.append(message)
        if completed_summary(message) and message.parent_id is not None:
            completed.add(message.parent_id)
        if message.role == "user" and message.id in completed:
            part = compaction_part(message)
            if part is not None:
                if part.tail_start_id is None:
                    break
                tail_start = part.tail_start_id
    kept.reverse()
    return _reorder(kept)


def compaction_part(message: Message) -> CompactionPart | None:
    """The compaction part of a compaction request (None for any other message)."""
    for part in message.parts:
        if isinstance(part, CompactionPart):
            return part
    return None


def is_real_user(message: Message) -> bool:
    """A user message a person wrote: not a compaction request, not written by the runtime or
    the client on its own (``synthetic``: an attachment, a hook's output, the compactor's
    note), with a part other than synthetic or ignored text (a message that arrived mid-turn
    keeps its text only as such parts). A turn begins at one (``policy._turns``)."""
    return (
        message.role == "user"
        and not message.synthetic
        and compaction_part(message) is None
        and any(not (isinstance(p, TextPart) and (p.synthetic or p.ignored)) for p in message.parts)
    )


def _reorder(messages: list[Message]) -> list[Message]:
    """Put the last completed compaction (its request and summary) before what it keeps:
    its kept tail, then every other message after the request, in order (§3.1 step 5).

    Unlike opencode, which moves the whole span from the request to the summary, only the
    two move: turns that arrived while the summary was being written (ids between the
    request and the summary) follow the summary, as newer turns do.
    """
    for c in range(len(messages) - 1, -1, -1):
        request = messages[c]
        part = compaction_part(request) if request.role == "user" else None
        if part is None:
            continue
        summary = next(
            (
                s
                for s in range(c + 1, len(messages))
                if messages[s].parent_id == request.id and completed_summary(messages[s])
            ),
            None,
        )
        if summary is None:
            continue
        start = 0
        if part.tail_start_id is not None:
            tail = next((t for t in range(c) if messages[t].id == part.tail_start_id), None)
            if tail is None:
                return messages
            start = tail
        return [
            *messages[:start],
            request,
            messages[summary],
            *messages[start:c],
            *messages[c + 1 : summary],
            *messages[summary + 1 :],
        ]
    return messages


def trim_before_last_summary(messages: list[Message]) -> list[Message]:
    """Kilo's ``trimBeforeLastSummary``: drop what precedes the newest completed summary's
    request. Unchanged (the same list) when there is no summary, its request is missing, or
    the request is already first. Idempotent. "Newest" is the greatest id, not the last
    position: after the reorder the two differ."""
    summaries = [m for m in messages if completed_summary(m)]
    if not summaries:
        return messages
    newest = max(summaries, key=lambda m: m.id)
    parent = next((i for i, m in enumerate(messages) if m.id == newest.parent_id), None)
    if parent is None or parent == 0:
        return messages
    return messages[parent:]


def media_cutoff(messages: Sequence[Message]) -> int:
    """The index of the last user message a person wrote (``is_real_user``; -1: none). Media
    before it is historical. Kilo Code's rule skips user messages of synthetic text only, so
    that a note the runtime writes does not strip what the user has just attached; a message
    marked synthetic whole (an attachment, a hook's output) is such a note too."""
    for i in range(len(messages) - 1, -1, -1):
        if is_real_user(messages[i]):
            return i
    return -1


def media_placeholder(part: FilePart) -> str:
    """``[Attached <mime>: <filename or file>]``."""
    return f"[Attached {part.mime}: {part.filename or 'file'}]"


def stripped_placeholder(part: FilePart) -> str:
    """What a stripped file part is sent as (MiMo): ``[stripped: <filename or mime>]``."""
    return f"[stripped: {part.filename or part.mime}]"


def strip_historical_media(messages: list[Message]) -> list[Message]:
    """Kilo's ``stripHistoricalMedia``: before the last real user turn, media file parts become
    text placeholders (same part id) and completed tools lose media attachments. Returns
    copies of the messages it changes; never mutates its input."""
    cutoff = media_cutoff(messages)
    if cutoff <= 0:
        return messages
    return [without_media(m) for m in messages[:cutoff]] + messages[cutoff:]


def without_media(message: Message) -> Message:
    """``message`` with media file parts as placeholders and media attachments dropped from
    completed tools (a copy, or the message itself when it has no media). A stripped file
    part keeps its own placeholder (``stripped_placeholder``)."""
    parts: list[Part] = []
    changed = False
    for part in message.parts:
        if isinstance(part, FilePart) and is_media(part.mime) and part.id not in message.stripped:
            part = TextPart(id=part.id, message_id=part.message_id, text=media_placeholder(part))
            changed = True
        elif (
            isinstance(part, ToolPart)
            and isinstance(part.state, ToolCompleted)
            and any(is_media(a.mime) for a in part.state.attachments)
        ):
            kept = tuple(a for a in part.state.attachments if not is_media(a.mime))
            part = msgspec.structs.replace(
                part, state=msgspec.structs.replace(part.state, attachments=kept)
            )
            changed = True
        parts.append(part)
    return msgspec.structs.replace(message, parts=parts) if changed else message


def in_view(history: History, message: Message, agent_id: str | None) -> bool:
    """Whether ``message`` is part of the view of ``agent_id``'s slice (None: the whole
    session, for reading). A compaction compacts its agent's slice only: in the
    whole-session view, a sub-agent's compaction request and summary are left out, so the
    main agent's history is never hidden by them."""
    if message.excluded or _pending_compaction(history, message):
        return False
    if agent_id is not None:
        return message.agent_id == agent_id
    return message.agent_id == MAIN_AGENT or not (
        message.summary or compaction_part(message) is not None
    )


def view_messages(history: History, options: ViewOptions) -> list[Message]:
    """The history messages a view is built from, in view order (steps 1-3 above)."""
    agent_id = options.agent_id
    newest_first = (m for m in reversed(history.messages) if in_view(history, m, agent_id))
    messages = trim_before_last_summary(_filter_newest_first(newest_first))
    if options.historical_media == "keep" or not any(completed_summary(m) for m in messages):
        return messages
    if options.historical_media == "latest-user":
        return strip_historical_media(messages)
    boundary = media_boundary(messages)
    return [without_media(m) if m.id < boundary else m for m in messages]


def media_boundary(messages: Sequence[Message]) -> str:
    """The newest completed compaction's request id: media in messages with smaller ids is
    historical (``historical_media="compaction"``). Empty when there is no summary."""
    return max((m.parent_id or "" for m in messages if completed_summary(m)), default="")


def _pending_compaction(history: History, message: Message) -> bool:
    """A compaction still being worked on (its request and the summary being written) is not
    part of any other request."""
    key = message.parent_id if message.summary else message.id
    compaction = history.state.compactions.get(key or "")
    return compaction is not None and compaction.status == "requested"


# --- conversion -----------------------------------------------------------------------------


def model_view(history: History, options: ViewOptions | None = None) -> list[ModelMessage]:
    """What the model is sent for ``history``: provider-neutral messages in order.

    Deterministic; never separates a tool call from its result (see the module docstring).
    """
    options = options or ViewOptions()
    messages = view_messages(history, options)
    latest_user = latest_user_id(messages)
    out: list[ModelMessage] = []
    for message in messages:
        environment = _environment(history, message, options, latest_user)
        out.extend(convert_message(message, options, environment))
    return out


def latest_user_id(messages: Sequence[Message]) -> str | None:
    """The newest user message a person wrote (``is_real_user``), which opens the running
    turn: the greatest id, not the last position (the compaction reorder moves older messages
    after newer ones). Kilo Code keeps one environment block per user turn, byte-identical at
    every step of it; the synthetic messages of a turn (attachments, hook output, the
    compactor's note) do not move it."""
    return max((m.id for m in messages if is_real_user(m)), default=None)


def _environment(
    history: History, message: Message, options: ViewOptions, latest_user: str | None
) -> str | None:
    if message.role != "user" or options.environment == "none":
        return None
    if options.environment == "latest" and message.id != latest_user:
        return None
    return history.state.environment.get(message.id)


def convert_message(
    message: Message, options: ViewOptions, environment: str | None = None
) -> list[ModelMessage]:
    """One history message as model messages (§2). Pure in its arguments, so it can be
    memoised on (message id, message version, options, environment)."""
    if message.role == "user":
        return _convert_user(message, options, environment)
    return _convert_assistant(message, options)


def _convert_user(
    message: Message, options: ViewOptions, environment: str | None
) -> list[ModelMessage]:
    content: list[ModelContent] = []
    for part in message.parts:
        match part:
            case TextPart(ignored=True) | TextPart(text=""):
                pass
            case TextPart(text=text, synthetic=synthetic):
                content.append(ModelText(text=text, synthetic=synthetic))
            case FilePart(mime=mime) if mime in _EXPANDED_MIMES:
                pass
            case FilePart() if part.id in message.stripped:
                content.append(ModelText(text=stripped_placeholder(part), synthetic=True))
            case FilePart() if options.strip_media and is_media(part.mime):
                content.append(ModelText(text=media_placeholder(part), synthetic=True))
            case FilePart():
                content.append(_file(part))
            case CompactionPart():
                content.append(ModelText(text=COMPACTION_PROMPT, synthetic=True))
            case SubtaskPart():
                content.append(ModelText(text=SUBTASK_PROMPT, synthetic=True))
            case _:
                pass
    if environment:
        content.append(ModelText(text=environment, synthetic=True))
    if not content:
        return []
    return [
        ModelMessage(
            role="user", content=tuple(content), source_id=message.id, synthetic=message.synthetic
        )
    ]


def _file(part: FilePart) -> ModelFile:
    return ModelFile(mime=part.mime, url=part.url, filename=part.filename)


def _keeps(message: Message) -> bool:
    """Errored assistant messages are dropped, except aborted ones with some content."""
    if message.error is None:
        return True
    return message.error.name == "AbortedError" and any(
        not isinstance(p, StepStartPart | StepFinishPart | ReasoningPart) for p in message.parts
    )


def _signed(part: ReasoningPart) -> bool:
    anthropic = part.metadata.get("anthropic")
    return isinstance(anthropic, dict) and bool(anthropic.get("signature"))


def _convert_assistant(message: Message, options: ViewOptions) -> list[ModelMessage]:
    if not _keeps(message):
        return []
    same_model = (
        options.model is None
        or message.model is None
        or (
            options.model.provider_id == message.model.provider_id
            and options.model.model_id == message.model.model_id
        )
    )
    stripped = message.stripped
    has_signed = any(
        isinstance(p, ReasoningPart) and p.id not in stripped and _signed(p) for p in message.parts
    )
    media_support = options.tool_media or tool_media_support(options.model)
    out: list[ModelMessage] = []
    moved_media: list[ModelFile] = []
    step: list[ModelContent] = []
    results: list[ModelToolResult] = []

    def close_step() -> None:
        if step:
            out.append(ModelMessage(role="assistant", content=tuple(step), source_id=message.id))
        if results:
            out.append(ModelMessage(role="tool", content=tuple(results), source_id=message.id))
        step.clear()
        results.clear()

    for part in message.parts:
        match part:
            case StepStartPart():
                close_step()
            case TextPart(ignored=True):
                pass
            case TextPart(text=text):
                if text == "" and has_signed:
                    text = " "
                if text:
                    step.append(ModelText(text=text, synthetic=part.synthetic))
            case ReasoningPart() if part.id in stripped:
                pass
            case ReasoningPart(text=text):
                if same_model:
                    step.append(ModelReasoning(text=text, provider_metadata=part.metadata))
                elif text.strip():
                    step.append(ModelText(text=text))
            case ToolPart():
                call, result, media = _tool(part, options, media_support, same_model)
                step.append(call)
                results.append(result)
                moved_media.extend(media)
            case _:
                pass
    close_step()
    if moved_media:
        out.append(
            ModelMessage(
                role="user",
                content=(ModelText(text=SYNTHETIC_ATTACHMENT_PROMPT, synthetic=True), *moved_media),
                source_id=message.id,
                synthetic=True,
            )
        )
    return out


def _tool(
    part: ToolPart, options: ViewOptions, media_support: MediaSupport, same_model: bool
) -> tuple[ModelToolCall, ModelToolResult, list[ModelFile]]:
    state = part.state
    call = ModelToolCall(
        call_id=part.call_id,
        tool=part.tool,
        input=state.input,
        provider_executed=part.provider_executed,
        provider_metadata=part.metadata if same_model else {},
    )
    moved: list[ModelFile] = []
    if isinstance(state, ToolCompleted):
        attachments: tuple[FilePart, ...] = ()
        if state.compacted_ms is not None:
            output = CLEARED_OUTPUT
        else:
            output = _capped(soft_trimmed(state.output, state.trimmed), part.id, options)
            attachments = () if options.strip_media else state.attachments
        inline: list[ModelFile] = []
        for a in attachments:
            target = inline if _accepts(media_support, a.mime) else moved
            target.append(_file(a))
        result = ModelToolResult(
            call_id=part.call_id, tool=part.tool, output=output, attachments=tuple(inline)
        )
    elif isinstance(state, ToolErrored):
        if state.interrupted and state.partial_output is not None:
            result = ModelToolResult(
                call_id=part.call_id,
                tool=part.tool,
                output=_capped(state.partial_output, part.id, options),
            )
        else:
            result = ModelToolResult(
                call_id=part.call_id, tool=part.tool, output=state.error, is_error=True
            )
    else:
        result = ModelToolResult(
            call_id=part.call_id, tool=part.tool, output=INTERRUPTED_OUTPUT, is_error=True
        )
    return call, result, moved


def _capped(output: str, part_id: str, options: ViewOptions) -> str:
    """A tool output as sent: cut to the view's line and byte caps (with a paging hint),
    then to ``tool_output_max_chars`` (summaries)."""
    if options.tool_output is not None:
        output = truncate_for_view(
            output,
            max_lines=options.tool_output.max_lines,
            max_bytes=options.tool_output.max_bytes,
            direction=options.tool_output.direction,
            part_id=part_id,
        ).text
    return truncate_tool_output(output, options.tool_output_max_chars)


def _accepts(support: MediaSupport, mime: str) -> bool:
    if not is_media(mime):
        return True
    return support == "all" or (support == "images" and mime.startswith("image/"))


def soft_trimmed(output: str, trimmed: tuple[int, int] | None) -> str:
    """MiMo's soft trim: the first and last characters kept, with a marker between them."""
    if trimmed is None:
        return output
    head, tail = trimmed
    if head + tail >= len(output):
        return output
    kept = (
        f"first and last {_size(head)}"
        if head == tail
        else f"first {_size(head)} and last {_size(tail)}"
    )
    marker = f"\n\n[... trimmed — kept {kept} of {len(output)} chars ...]\n\n"
    return output[:head] + marker + (output[-tail:] if tail else "")


def _size(chars: int) -> str:
    return f"{chars / 1024:g}K" if chars >= 1024 and chars % 512 == 0 else str(chars)


def interrupted_calls(
    history: History, *, time_ms: int, unfinished: bool = False
) -> list[ToolStateChanged]:
    """The events that answer every tool call still pending or running in a finished (or
    errored) assistant message with a synthetic ``INTERRUPTED_OUTPUT`` error; with
    ``unfinished``, also those of messages that never finished (after a crash, when the
    process that was running them is gone).

    The view already answers such calls; recording the answer once, when a crash,
    cancellation or abort leaves a call behind, makes the log say so and replay exact.
    ``time_ms`` is the time to stamp them with (the core reads no clock).
    """
    events: list[ToolStateChanged] = []
    for message in history.messages:
        if message.role != "assistant":
            continue
        if not unfinished and message.finish is None and message.error is None:
            continue
        for part in message.parts:
            if isinstance(part, ToolPart) and isinstance(part.state, ToolPending | ToolRunning):
                events.append(
                    ToolStateChanged(
                        session_id=history.session_id,
                        agent_id=message.agent_id,
                        time_ms=time_ms,
                        message_id=message.id,
                        part_id=part.id,
                        state=ToolErrored(
                            input=part.state.input,
                            error=INTERRUPTED_OUTPUT,
                            synthetic=True,
                            ended_ms=time_ms,
                        ),
                    )
                )
    return events


def tool_pairs_ok(view: Iterable[ModelMessage]) -> bool:
    """True when every tool call is answered, in the very next message, by exactly one result
    and every result answers a call of the message just before it."""
    pending: list[str] = []
    for message in view:
        if message.role == "tool":
            answered = [c.call_id for c in message.content if isinstance(c, ModelToolResult)]
            if sorted(answered) != sorted(pending) or len(set(answered)) != len(answered):
                return False
            pending = []
            continue
        if pending:
            return False
        if message.role == "assistant":
            pending = [c.call_id for c in message.content if isinstance(c, ModelToolCall)]
        elif any(isinstance(c, ModelToolResult) for c in message.content):
            return False
    return not pending
