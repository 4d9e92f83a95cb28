"""Scripted answers: each conversation plays its script from its own cursor, requests that
may not call tools get text, the outputs sent back are checked, and the same requests give
the same bytes. These drive ``LoopbackCore`` directly, without sockets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextledger.compaction import SUMMARY_OPENING
from contextledger.testing.loopback import (
    LoopbackCore,
    Reply,
    Script,
    ToolCall,
    asks_for_summary,
    read_step,
    tool_loop,
)
from tests.testing.loopback.bodies import (
    MODELS,
    anthropic,
    chat,
    chat_call,
    chat_result,
    post,
    tool_result,
    tool_use,
    user,
)

TWO_CALLS = Script(
    steps=(
        Reply(
            text="Looking.",
            tool_calls=(
                ToolCall(name="bash", input={"command": "ls"}, output="a.py"),
                ToolCall(name="read", input={"path": "a.py"}, output="print(1)"),
            ),
        ),
        Reply(text="It prints 1."),
    )
)


def _core(script: Script | Callable[[str], Script] | None = None, **kw: Any) -> LoopbackCore:
    return LoopbackCore(script, models=MODELS, **kw)


def _answered(core: LoopbackCore, body: dict[str, Any], api: str = "anthropic") -> Any:
    reaction, answer = post(core, body, api=api)
    assert reaction.status == 200, answer
    return answer


def test_a_conversation_plays_its_steps_in_order_then_the_final_text() -> None:
    core = _core(tool_loop(2, output=lambda n: f"out {n}", final="Finished."))
    first = read_step(_answered(core, anthropic(user("go"))))
    assert (first.text, first.stop) == ("Running step 1.", "tool_use")
    assert [(c.id, c.name, c.input) for c in first.calls] == [
        ("toolu_loopback_000001", "bash", {"command": "step 1"})
    ]
    assert core.expected_output("toolu_loopback_000001") == "out 1"
    history = [
        user("go"),
        tool_use("toolu_loopback_000001", "step 1"),
        tool_result("toolu_loopback_000001", "out 1"),
    ]
    second = read_step(_answered(core, anthropic(*history)))
    assert second.calls[0].input == {"command": "step 2"}
    history += [tool_use(second.calls[0].id, "step 2"), tool_result(second.calls[0].id, "out 2")]
    third = read_step(_answered(core, anthropic(*history)))
    assert (third.text, third.calls, third.stop) == ("Finished.", (), "end_turn")
    history += [{"role": "assistant", "content": "Finished."}, user("again?")]
    assert read_step(_answered(core, anthropic(*history))).text == "Finished."


def test_each_conversation_has_its_own_cursor() -> None:
    core = _core(tool_loop(3))
    one = read_step(_answered(core, anthropic(user("go"), metadata={"user_id": "ses_1"})))
    two = read_step(_answered(core, anthropic(user("go"), metadata={"user_id": "ses_2"})))
    chat_one = read_step(_answered(core, chat(prompt_cache_key="ses_3"), api="chat"))
    assert one.calls[0].input == two.calls[0].input == chat_one.calls[0].input
    assert len({one.calls[0].id, two.calls[0].id, chat_one.calls[0].id}) == 3
    assert [e.conversation for e in core.exchanges] == ["ses_1", "ses_2", "ses_3"]


def test_a_script_per_conversation_comes_from_a_function() -> None:
    def script(key: str) -> Script:
        return Script(steps=(Reply(text=f"Hello, {key or 'nobody'}."),))

    core = _core(script)
    assert read_step(_answered(core, anthropic(metadata={"user_id": "ada"}))).text == (
        "Hello, ada."
    )
    assert read_step(_answered(core, anthropic())).text == "Hello, nobody."


def test_a_request_that_may_not_call_tools_gets_text_and_keeps_the_step() -> None:
    core = _core(tool_loop(1))
    summary = read_step(_answered(core, anthropic(user("summarize"), tool_choice={"type": "none"})))
    assert (summary.calls, summary.text) == ((), Script().tools_off.text)
    bare = read_step(_answered(core, chat(tools=[]), api="chat"))
    assert bare.calls == ()
    step = read_step(_answered(core, anthropic(user("go"))))
    assert step.calls[0].input == {"command": "step 1"}


def test_a_summary_request_gets_text_and_keeps_the_step_with_the_sessions_tool_choice() -> None:
    core = _core(tool_loop(1))
    instruction = f"{SUMMARY_OPENING}\n\nSummarise the conversation."
    asked = anthropic(user("go"), {"role": "user", "content": [{"type": "text", "text": "x"}]})
    asked["messages"][-1]["content"].append({"type": "text", "text": instruction})
    summary = read_step(_answered(core, asked))
    assert (summary.calls, summary.text) == ((), Script().tools_off.text)
    chat_summary = read_step(_answered(core, chat(user(instruction)), api="chat"))
    assert (chat_summary.calls, chat_summary.text) == ((), Script().tools_off.text)
    # The opening anywhere but at the start of the last text asks for no summary.
    quoted = anthropic(user(f"{SUMMARY_OPENING}"), user("go on"))
    assert not asks_for_summary(quoted) and asks_for_summary(asked)
    step = read_step(_answered(core, quoted))
    assert step.calls[0].input == {"command": "step 1"}


def test_outputs_that_differ_from_the_script_are_rejected_and_recorded() -> None:
    core = _core(TWO_CALLS)
    first = read_step(_answered(core, anthropic(user("go"))))
    ls, read = first.calls
    wrong = anthropic(
        user("go"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "mine_1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "mine_2", "name": "read", "input": {"path": "a.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "mine_1", "content": "a.py"},
                {
                    "type": "tool_result",
                    "tool_use_id": "mine_2",
                    "content": [{"type": "text", "text": "print(2)"}],
                },
            ],
        },
    )
    reaction, answer = post(core, wrong)
    message = "the result of tool call mine_2 (read) is 'print(2)', expected 'print(1)'"
    assert reaction.status == 400
    assert answer["error"] == {
        "type": "invalid_request_error",
        "message": "loopback script: " + message,
    }
    assert core.mismatches == [message]
    right = wrong["messages"][2]["content"][1]
    right["content"] = [{"type": "text", "text": "print(1)"}]
    assert read_step(_answered(core, wrong)).text == "It prints 1."
    assert (ls.name, read.name) == ("bash", "read")


def test_outputs_are_checked_on_chat_completions_by_call_id() -> None:
    core = _core(tool_loop(2, output=lambda n: f"out {n}"))
    call = read_step(_answered(core, chat(), api="chat")).calls[0]
    assert call.id == "call_loopback_000001"
    sent = chat(
        {"role": "user", "content": "hello"}, chat_call(call.id, "step 1"), chat_result(call.id)
    )
    reaction, answer = post(core, sent, api="chat")
    assert reaction.status == 400
    assert answer["error"]["message"] == (
        "loopback script: the result of tool call call_loopback_000001 (bash) is 'ok', "
        "expected 'out 1'"
    )
    sent["messages"][-1]["content"] = "out 1"
    assert read_step(_answered(core, sent, api="chat")).calls[0].input == {"command": "step 2"}


def test_unchecked_scripts_take_any_output() -> None:
    script = Script(steps=tool_loop(1).steps, check_outputs=False)
    core = _core(script)
    call = read_step(_answered(core, anthropic(user("go")))).calls[0]
    history = [user("go"), tool_use(call.id, "step 1"), tool_result(call.id, "anything")]
    assert read_step(_answered(core, anthropic(*history))).stop == "end_turn"
    assert core.mismatches == []


def test_an_answer_longer_than_max_tokens_is_cut_and_the_step_kept() -> None:
    long = Script(steps=(Reply(text="word " * 100, tool_calls=(ToolCall(name="bash"),)),))
    core = _core(long)
    cut = _answered(core, anthropic(user("go"), max_tokens=10))
    assert cut["stop_reason"] == "max_tokens"
    assert cut["content"] == [{"type": "text", "text": ("word " * 100)[:40]}]
    assert cut["usage"]["output_tokens"] == 10
    whole = read_step(_answered(core, anthropic(user("go"), max_tokens=1000)))
    assert (whole.stop, len(whole.calls)) == ("tool_use", 1)


def test_usage_reports_scripted_or_estimated_output_tokens() -> None:
    core = _core(Script(steps=(Reply(text="Hi.", output_tokens=42), Reply(text="x" * 400))))
    assert _answered(core, anthropic())["usage"]["output_tokens"] == 42
    other = chat(prompt_cache_key="other")
    assert _answered(core, other, api="chat")["usage"]["completion_tokens"] == 42
    # ["xxx...x"]: 404 characters of JSON, at four per token.
    assert _answered(core, anthropic())["usage"]["output_tokens"] == 101


def test_the_same_requests_give_the_same_bytes() -> None:
    def run() -> list[bytes]:
        core = _core(tool_loop(2))
        sent = [
            post(core, anthropic(user("go")))[0].body,
            post(core, chat(), api="chat")[0].body,
            post(core, anthropic(user("go")))[0].body,
            post(core, chat(tools=[]), api="chat")[0].body,
        ]
        return sent

    assert run() == run()


def test_rejected_requests_take_no_step() -> None:
    core = _core(tool_loop(1))
    reaction, _ = post(core, anthropic(user("")))
    assert reaction.status == 400
    assert read_step(_answered(core, anthropic(user("go")))).calls[0].input == {"command": "step 1"}
