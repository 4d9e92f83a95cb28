from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

import msgspec
import pytest
import structlog

from contextledger.config import Config, RequestConfig, ViewConfig
from contextledger.events import (
    MAIN_AGENT,
    Event,
    InstructionLoaded,
    MemoryPinned,
    ModelRef,
    PrefixAdvanced,
    PrefixPinned,
    PrefixRotated,
    RecordedEvent,
    RequestSent,
    ToolOutputCleared,
    Usage,
    UsageReported,
)
from contextledger.events._parts import StepStartPart, ToolSchema
from contextledger.history import History
from contextledger.ledger import SessionLog
from contextledger.policy._decisions import forced_prune
from contextledger.policy._overflow import preflight_tokens
from contextledger.policy._tokens import measure_request
from contextledger.policy._transform import StrategyError, TransformContext
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.providers._openai_chat import OpenAIChat
from contextledger.request._builder import RequestBuilder, RequestInputs
from contextledger.request._context import MAX_STEPS_PROMPT
from contextledger.request._instructions import InstructionFile
from contextledger.request._prepare import prepare_request
from contextledger.request._recording import Finish, answer_events
from contextledger.request._system import SystemSegments
from contextledger.store._memory import MemoryStore
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._messages import ModelMessage, ModelToolResult
from contextledger.vocabulary._models import Model, ModelLimits

MODEL = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
SEGMENTS = SystemSegments(identity="You are an engineer.", prompt="Be brief.", environment="<env/>")
READ = ToolSchema(name="read", description="Read a file.", input_schema={"type": "object"})
BASH = ToolSchema(name="bash", description="Run a command.", input_schema={"type": "object"})
INPUTS = RequestInputs(model=MODEL, segments=SEGMENTS, tools=(READ, BASH), max_output_tokens=1000)


def _history(events: Sequence[Event]) -> History:
    return History.rebuild(
        "ses_test", [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]
    )


def _turn(b: SessionBuilder, text: str = "Fix the bug.") -> tuple[str, str]:
    user = b.user(text, environment="<environment_details>t</environment_details>")
    assistant = b.assistant(user)
    return user, assistant


def _append(history: History, events: Sequence[Event]) -> None:
    start = history.seq + 1
    history.apply_all(RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, start))


def test_memory_and_system_instructions_come_from_the_log_in_the_second_block() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    b.add(MemoryPinned, text="Prefer small diffs.")
    b.add(InstructionLoaded, path="AGENTS.md", text="Run make test.", source="project")
    _turn(b)
    built = RequestBuilder(AnthropicMessages()).build(_history(b.events), INPUTS)
    static, session = built.request.system
    assert static == "You are an engineer.\n\nBe brief."
    assert session == (
        "<env/>\n\nPrefer small diffs.\n\nInstructions from: AGENTS.md\nRun make test."
    )


def test_directory_rules_stay_out_of_the_system_prompt() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _, assistant = _turn(b)
    b.add(
        InstructionLoaded,
        path="src/AGENTS.md",
        text="Tabs.",
        source="directory",
        message_id=assistant,
    )
    built = RequestBuilder(AnthropicMessages()).build(_history(b.events), INPUTS)
    assert "Tabs." not in "".join(built.request.system)


def test_the_first_request_pins_the_prefix_and_the_next_keeps_it() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    history = _history(b.events)
    builder = RequestBuilder(AnthropicMessages())
    first = builder.build(history, INPUTS)
    event = first.prefix.event("ses_test")
    assert isinstance(event, PrefixPinned)
    assert event.tool_table == (READ, BASH)
    _append(history, [event])
    second = builder.build(history, INPUTS)
    assert second.prefix.action == "keep"
    assert second.encoded.body == first.encoded.body


def test_a_date_change_in_the_environment_does_not_change_the_pinned_system() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    history = _history(b.events)
    builder = RequestBuilder(AnthropicMessages())
    first = builder.build(history, INPUTS)
    pin = first.prefix.event("ses_test")
    assert pin is not None
    _append(history, [pin])
    tomorrow = RequestInputs(
        model=MODEL,
        segments=SystemSegments(
            identity="You are an engineer.", prompt="Be brief.", environment="<env>2</env>"
        ),
        tools=(BASH, READ),
        max_output_tokens=1000,
    )
    later = builder.build(history, tomorrow)
    assert later.prefix.action == "keep"
    assert later.request.system == first.request.system
    assert [t.name for t in later.request.tools] == ["read", "bash"]


def test_a_new_tool_rotates_the_prefix_and_is_appended() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    history = _history(b.events)
    builder = RequestBuilder(AnthropicMessages())
    pin = builder.build(history, INPUTS).prefix.event("ses_test")
    assert pin is not None
    _append(history, [pin])
    grep = ToolSchema(name="grep", description="Search.", input_schema={"type": "object"})
    built = builder.build(
        history, RequestInputs(model=MODEL, segments=SEGMENTS, tools=(grep, READ, BASH))
    )
    assert isinstance(built.prefix.event("ses_test"), PrefixRotated)
    assert [t.name for t in built.request.tools] == ["read", "bash", "grep"]


_MARKER = b',"cache_control":{"type":"ephemeral"}'


@pytest.mark.parametrize("messages", ["latest-user-message", 2])
def test_steps_of_one_turn_repeat_every_byte_before_the_last_message(
    messages: str | int,
) -> None:
    """Under the native policy the bytes are identical; with the last two messages marked,
    they are identical once the markers (which providers do not match on) are left out."""
    b = SessionBuilder("ses_test", model=MODEL)
    _, assistant = _turn(b)
    history = _history(b.events)
    config = Config(request=RequestConfig(cache_messages=messages))  # type: ignore[arg-type]
    builder = RequestBuilder(AnthropicMessages(), config)
    bodies = []
    for step in range(3):
        mark = len(b.events)
        if step:
            b.part(StepStartPart(id=b.new_part_id(), message_id=assistant))
        call = b.tool_call(assistant, "bash", {"command": f"step {step}"})
        b.tool_result(call, f"output {step}")
        _append(history, b.events[mark:])
        built = builder.build(history, INPUTS)
        bodies.append(built.encoded)
    for earlier, later in itertools.pairwise(bodies):
        span = earlier.body[: earlier.message_offsets[-1]]
        if messages == "latest-user-message":
            assert later.body.startswith(span)
        else:
            assert later.body.replace(_MARKER, b"").startswith(span.replace(_MARKER, b""))


def test_the_last_two_messages_carry_the_message_marks_under_the_default_policy() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _, assistant = _turn(b)
    call = b.tool_call(assistant, "bash", {"command": "ls"})
    b.tool_result(call, "a b")
    built = RequestBuilder(AnthropicMessages()).build(_history(b.events), INPUTS)
    body = json.loads(built.encoded.body)
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in m["content"][-1]]
    assert marked == [len(body["messages"]) - 2, len(body["messages"]) - 1]


def test_the_native_policy_marks_the_latest_user_message() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _, assistant = _turn(b)
    call = b.tool_call(assistant, "bash", {"command": "ls"})
    b.tool_result(call, "a b")
    config = Config(request=RequestConfig(cache_messages="latest-user-message"))
    built = RequestBuilder(AnthropicMessages(), config).build(_history(b.events), INPUTS)
    body = json.loads(built.encoded.body)
    marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in m["content"][-1]]
    assert marked == [0]


def test_formats_without_inline_markers_get_no_marks() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    built = RequestBuilder(OpenAIChat()).build(_history(b.events), INPUTS)
    assert built.request.marks == ()


def test_the_last_step_ends_with_a_user_message_and_disables_tools() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    inputs = RequestInputs(model=MODEL, segments=SEGMENTS, tools=(READ,), last_step=True)
    built = RequestBuilder(AnthropicMessages()).build(_history(b.events), inputs)
    body = json.loads(built.encoded.body)
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"][0]["text"] == MAX_STEPS_PROMPT
    assert body["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in body["tools"]] == ["read"]


def test_the_sent_event_records_the_tool_choice_as_sent() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    builder = RequestBuilder(AnthropicMessages())
    last = RequestInputs(model=MODEL, segments=SEGMENTS, tools=(READ,), last_step=True)
    assert builder.build(_history(b.events), last).sent_event("ses_test").tool_choice == "none"
    assert builder.build(_history(b.events), INPUTS).sent_event("ses_test").tool_choice is None


def test_the_sent_event_hashes_the_body_and_the_span_before_the_last_message() -> None:
    import hashlib

    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    built = RequestBuilder(AnthropicMessages()).build(_history(b.events), INPUTS)
    sent = built.sent_event("ses_test", time_ms=5)
    body = built.encoded.body
    assert sent.body_hash == hashlib.sha256(body).hexdigest()
    span = built.encoded.message_offsets[-1]
    assert sent.prefix_hash == hashlib.sha256(body[:span]).hexdigest()
    assert sent.body_bytes == len(body)
    assert sent.last_message_id == built.request.messages[-1].source_id


# --- the shell -----------------------------------------------------------------------------


async def _log(events: Sequence[Event]) -> SessionLog:
    log = await SessionLog.open(MemoryStore(), "ses_test")
    await log.append(events)
    return log


async def test_prepare_request_pins_memory_and_instructions_once_and_records_the_request() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b)
    log = await _log(b.events)
    builder = RequestBuilder(AnthropicMessages())
    files = [InstructionFile(path="AGENTS.md", text="Run make test.", source="project")]
    first = await prepare_request(
        log, builder, INPUTS, time_ms=1, memory="Prefer small diffs.", instructions=files
    )
    second = await prepare_request(
        log,
        builder,
        INPUTS,
        time_ms=2,
        memory="Changed memory.",
        instructions=[InstructionFile(path="AGENTS.md", text="Changed.", source="project")],
    )
    assert second.encoded.body == first.encoded.body
    recorded = await log.store.read("ses_test")
    kinds = [type(r.event).__name__ for r in recorded[len(b.events) :]]
    assert kinds == [
        "MemoryPinned",
        "InstructionLoaded",
        "PrefixPinned",
        "RequestSent",
        "RequestSent",
    ]
    assert isinstance(recorded[-1].event, RequestSent)


async def test_the_payload_guard_clears_old_outputs_and_sends_under_the_limit() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    for turn in range(4):
        _, assistant = _turn(b, f"turn {turn}")
        call = b.tool_call(assistant, "bash", {"command": "cat big.log"})
        b.tool_result(call, "x" * 200_000)
        b.finish(assistant, "stop")
    log = await _log(b.events)
    builder = RequestBuilder(
        AnthropicMessages(), Config(request=RequestConfig(payload_limit_bytes=150_000))
    )
    built = await prepare_request(log, builder, INPUTS, time_ms=1)
    assert not built.over_limit and built.stripped_media
    cleared = [
        r.event for r in await log.store.read("ses_test") if isinstance(r.event, ToolOutputCleared)
    ]
    assert len(cleared) == 1 and cleared[0].reason == "payload-limit"
    assert len(built.encoded.body) < 150_000


async def test_a_request_still_over_the_limit_is_sent_with_a_warning() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _turn(b, "y" * 50_000)
    log = await _log(b.events)
    builder = RequestBuilder(
        AnthropicMessages(), Config(request=RequestConfig(payload_limit_bytes=10_000))
    )
    with structlog.testing.capture_logs() as logs:
        built = await prepare_request(log, builder, INPUTS, time_ms=1)
    assert built.over_limit
    assert any(entry["event"] == "payload_over_limit" for entry in logs)
    assert isinstance((await log.store.read("ses_test"))[-1].event, RequestSent)


def test_the_usage_report_of_an_answer_carries_its_request_s_model_size_and_measure() -> None:

    b = SessionBuilder("ses_test", model=MODEL)
    _, assistant = _turn(b)
    history = _history(b.events)
    built = RequestBuilder(AnthropicMessages()).build(history, INPUTS)
    _append(history, [built.sent_event("ses_test")])
    finish = Finish(message_id=assistant, usage=Usage(input=5, cache_read=7))
    (event,) = [
        e
        for e in answer_events(history, finish, {"session_id": "ses_test"})
        if isinstance(e, UsageReported)
    ]
    assert event.model == MODEL and event.usage.prompt == 12
    assert event.estimated_tokens == built.estimated_tokens > 0
    assert event.measure == built.measure == measure_request(built.request)


async def test_overlapping_calls_of_two_agents_each_report_their_own_request() -> None:
    """The sub-agent's request is sent while the main agent's call runs: each answer's usage
    report carries its own agent's request's estimate and measure, and advances its own
    agent's prefix."""
    b = SessionBuilder("ses_test", model=MODEL)
    users = {agent: b.user(f"{agent} task", agent_id=agent) for agent in (MAIN_AGENT, "explore")}
    log = await _log(b.events)
    built = {
        agent: await prepare_request(
            log, RequestBuilder(AnthropicMessages(), agent_id=agent), INPUTS, time_ms=1
        )
        for agent in users
    }
    answers = {agent: b.assistant(user, agent_id=agent) for agent, user in users.items()}
    await log.append(b.events[-4:])
    for agent in users:  # the main agent's answer arrives first
        finish = Finish(message_id=answers[agent], usage=Usage(input=900), agent_id=agent)
        stamp = {"session_id": "ses_test", "agent_id": agent}
        events = answer_events(log.history, finish, stamp)
        await log.append(events)
        report, advanced = events
        assert isinstance(report, UsageReported) and isinstance(advanced, PrefixAdvanced)
        assert report.measure == built[agent].measure is not None
        assert report.estimated_tokens == built[agent].estimated_tokens > 0
        assert advanced.agent_id == agent and advanced.message_id == users[agent]


def test_the_output_cap_reads_the_prompt_as_the_preflight_estimate_of_the_messages() -> None:
    model = Model(
        provider_id="anthropic",
        model_id="claude-sonnet-4-5",
        limits=ModelLimits(context=8_000, output=8_000),
    )
    config = Config()
    inputs = msgspec.structs.replace(INPUTS, max_output_tokens=6_000)
    for extra in range(8):  # bodies of eight lengths: every remainder of four characters
        b = SessionBuilder("ses_test", model=MODEL)
        _turn(b, "Fix the bug." + "!" * extra)
        builder = RequestBuilder(AnthropicMessages(), config, model=model)
        built = builder.build(_history(b.events), inputs)
        prompt = preflight_tokens(built.encoded.messages_end, config)
        # The window is what binds: the cap is what the prompt leaves after the safety margin.
        assert built.request.max_output_tokens == 8_000 - prompt - config.output.safety < 6_000


def _with_a_sub_agent() -> History:
    """Two turns of the main agent and nine of a sub-agent, every output 10,000 tokens."""
    b = SessionBuilder("ses_test", model=MODEL)
    for agent, turns in ((MAIN_AGENT, 2), ("task_1", 9)):
        for turn in range(turns):
            user = b.user(f"{agent} step {turn}", agent_id=agent)
            assistant = b.assistant(user, agent_id=agent)
            call = b.tool_call(assistant, "bash", {"command": "cat big.log"}, agent_id=agent)
            b.tool_result(call, "x" * 40_000, agent_id=agent)
            b.finish(assistant, "stop", agent_id=agent)
    return _history(b.events)


def test_a_builder_without_an_agent_sends_and_prunes_the_main_agent_s_slice() -> None:
    history = _with_a_sub_agent()
    default = RequestBuilder(AnthropicMessages())
    main = RequestBuilder(AnthropicMessages(), agent_id=MAIN_AGENT)
    built = default.build(history, INPUTS)
    assert built.encoded.body == main.build(history, INPUTS).encoded.body
    sources = {m.source_id for m in built.request.messages}
    assert {history.message(s).agent_id for s in sources} == {MAIN_AGENT}
    assert built.sent_event("ses_test").agent_id == default.agent_id == MAIN_AGENT
    # The main slice's two turns are protected: only the sub-agent has outputs to clear.
    assert default.payload_prune(history) is None
    sub = RequestBuilder(AnthropicMessages(), agent_id="task_1").payload_prune(history)
    assert sub is not None and sub.agent_id == "task_1" and sub.reason == "payload-limit"
    plan = forced_prune(history, Config(), agent_id="task_1", reason="payload-limit")
    assert plan is not None and sub.part_ids == plan.part_ids


@pytest.mark.parametrize("strip", [False, True])
def test_build_is_deterministic_across_builders(strip: bool) -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    _, assistant = _turn(b)
    call = b.tool_call(assistant, "read", {"path": "a.png"})
    b.tool_result(call, "image", attachments=(("image/png", "a.png"),))
    history = _history(b.events)
    one = RequestBuilder(AnthropicMessages()).build(history, INPUTS, strip_media=strip)
    two = RequestBuilder(AnthropicMessages()).build(_history(b.events), INPUTS, strip_media=strip)
    assert one.encoded.body == two.encoded.body


def test_each_request_s_measure_is_its_own_however_the_view_changed() -> None:
    """The builder keeps running totals over the messages a live view did not change; after
    new steps, a prune of an old output and a truncated output, each request's measure is
    still ``measure_request`` of that request, and the paging tool joins the truncated one."""
    b = SessionBuilder("ses_test", model=MODEL)
    history = _history(b.events)
    builder = RequestBuilder(AnthropicMessages())
    calls = []
    for n in range(4):
        before = len(b.events)
        _, assistant = _turn(b, f"Step {n}.")
        calls.append(b.tool_call(assistant, "bash", {"command": f"step {n}"}))
        output = "x\n" * 3000 if n == 3 else f"output {n}"
        b.tool_result(calls[-1], output)
        if n == 2:
            b.prune(calls[:1])
        _append(history, b.events[before:])
        built = builder.build(history, INPUTS)
        assert built.measure == measure_request(built.request)
        names = [t.name for t in built.request.tools]
        assert names == (["read", "bash", "read_tool_output"] if n == 3 else ["read", "bash"])


def test_ai_sdk_capture_turn_three_reads_what_turn_one_wrote() -> None:
    """opencode #45750: marks on system[0] and the last two message blocks; the prefix turn 1
    wrote at its last mark is the start of turn 3's request (markers aside)."""
    config = Config(request=RequestConfig(cache="ai-sdk"))
    b = SessionBuilder("ses_test", model=MODEL)
    history = _history(b.events)
    builder = RequestBuilder(AnthropicMessages(), config)
    written: list[bytes] = []
    for turn in range(3):
        mark = len(b.events)
        _, assistant = _turn(b, f"turn {turn}")
        _append(history, b.events[mark:])
        built = builder.build(history, INPUTS)
        body = json.loads(built.encoded.body)
        assert "cache_control" in body["system"][0]
        marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in m["content"][-1]]
        assert marked == [len(body["messages"]) - 2, len(body["messages"]) - 1][-len(marked) :]
        written.append(built.encoded.body.replace(b',"cache_control":{"type":"ephemeral"}', b""))
        mark = len(b.events)
        b.text(assistant, f"answer {turn}")
        b.finish(assistant)
        _append(history, b.events[mark:])
    first_turn = written[0][: written[0].rindex(b"]")]
    assert written[2].startswith(first_turn)


def _long_outputs() -> History:
    b = SessionBuilder("ses_test", model=MODEL)
    for turn in range(3):
        _, assistant = _turn(b, f"Step {turn}.")
        call = b.tool_call(assistant, "bash", {"command": f"cat big_{turn}.log"})
        b.tool_result(call, "x" * 2_000)
        b.finish(assistant, "tool-calls")
    return _history(b.events)


def test_a_transform_named_in_config_shapes_the_view_before_encoding() -> None:
    history = _long_outputs()
    config = Config(view=ViewConfig(transform="contextledger.strategies:baseline"))
    plain = RequestBuilder(AnthropicMessages()).build(history, INPUTS)
    same = RequestBuilder(AnthropicMessages(), config).build(history, INPUTS)
    assert same.encoded.body == plain.encoded.body
    capped = Config(view=ViewConfig(transform="tests.request.test_builder:cap_outputs"))
    built = RequestBuilder(AnthropicMessages(), capped).build(history, INPUTS)
    outputs = [
        c.output
        for m in built.request.messages
        for c in m.content
        if isinstance(c, ModelToolResult)
    ]
    assert outputs == ["x" * 500] * 3
    assert len(built.encoded.body) < len(plain.encoded.body) - 3 * 1_400


def test_a_transform_that_cannot_be_loaded_or_splits_a_call_is_refused() -> None:
    with pytest.raises(StrategyError, match="cannot import"):
        RequestBuilder(AnthropicMessages(), Config(view=ViewConfig(transform="no_such_mod:f")))
    splitting = Config(view=ViewConfig(transform="tests.strategies._custom:last_two"))
    b = SessionBuilder("ses_test", model=MODEL)
    _, assistant = _turn(b)
    b.tool_result(b.tool_call(assistant, "bash", {"command": "ls"}), "a b")
    b.finish(assistant, "tool-calls")
    b.user("And now?")  # the last two messages: a result without its call, and this
    builder = RequestBuilder(AnthropicMessages(), splitting)
    with pytest.raises(StrategyError, match="separated a tool call from its result"):
        builder.build(_history(b.events), INPUTS)


def cap_outputs(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
    """Every tool output cut to its first 500 characters (named in a config above)."""
    return [
        msgspec.structs.replace(
            m,
            content=tuple(
                msgspec.structs.replace(c, output=c.output[:500])
                if isinstance(c, ModelToolResult)
                else c
                for c in m.content
            ),
        )
        for m in view
    ]
