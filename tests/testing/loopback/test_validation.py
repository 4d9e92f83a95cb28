"""The loopback provider rejects invalid requests as the real APIs do: the status, the error
type and the message each API answers with, in its own error shape, over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from contextledger.cachesim import blocks_from_anthropic_body, blocks_from_chat_body
from contextledger.testing.loopback import LoopbackProvider
from tests.testing.loopback.bodies import (
    ANTHROPIC_HEADERS,
    CHAT_HEADERS,
    MODELS,
    SMALL,
    SMALL_GPT,
    anthropic,
    chat,
    chat_call,
    chat_result,
    tool_result,
    tool_use,
    user,
)

MARK = {"type": "ephemeral"}


@pytest.fixture(scope="module")
def provider() -> Iterator[LoopbackProvider]:
    with LoopbackProvider(models=MODELS) as server:
        yield server


@pytest.fixture(scope="module")
def client(provider: LoopbackProvider) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=provider.url) as http:
        yield http


def _post(
    client: httpx.Client,
    path: str,
    body: Any,
    headers: dict[str, str],
    method: str = "POST",
) -> httpx.Response:
    content = body if isinstance(body, bytes) else msgspec.json.encode(body)
    return client.request(method, path, content=content, headers=headers)


def _prompt(body: dict[str, Any]) -> int:
    return sum(b.tokens for b in blocks_from_anthropic_body(body))


def _chat_prompt(body: dict[str, Any]) -> int:
    return sum(b.tokens for b in blocks_from_chat_body(body))


LONG = anthropic(user("x" * 8_200), model=SMALL.model_id, max_tokens=10)
CAPPED = anthropic(user("x" * 4_400), model=SMALL.model_id, max_tokens=1_000)
CHAT_LONG = chat(
    {"role": "user", "content": "x" * 8_200}, model=SMALL_GPT.model_id, max_completion_tokens=10
)
CHAT_CAPPED = chat(
    {"role": "user", "content": "x" * 4_400},
    model=SMALL_GPT.model_id,
    max_completion_tokens=1_000,
)
NO_KEY = {k: v for k, v in ANTHROPIC_HEADERS.items() if k != "x-api-key"}
NO_VERSION = {k: v for k, v in ANTHROPIC_HEADERS.items() if k != "anthropic-version"}
FIVE_MARKS = anthropic(
    *(user(f"part {n}") for n in range(5)),
)
for message in FIVE_MARKS["messages"]:
    message["content"][0]["cache_control"] = MARK
LATE_HOUR = anthropic(
    {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": MARK}]},
    {"role": "assistant", "content": "b"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "c", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ],
    },
)
MISSING = (
    "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
UNEXPECTED = (
    "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
    "message."
)

ANTHROPIC_CASES: list[tuple[str, Any, dict[str, str], int, str, str]] = [
    (
        "no key",
        anthropic(),
        NO_KEY,
        401,
        "authentication_error",
        "x-api-key header is required",
    ),
    (
        "no version",
        anthropic(),
        NO_VERSION,
        400,
        "invalid_request_error",
        "anthropic-version: header is required",
    ),
    (
        "not JSON",
        b"{not json",
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "There was an error parsing the body: it is not valid JSON",
    ),
    (
        "unknown field",
        anthropic(temperature=0, frequency_penalty=1),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "frequency_penalty: Extra inputs are not permitted",
    ),
    (
        "no max_tokens",
        {k: v for k, v in anthropic().items() if k != "max_tokens"},
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "max_tokens: Field required",
    ),
    (
        "unknown model",
        anthropic(model="claude-nonexistent"),
        ANTHROPIC_HEADERS,
        404,
        "not_found_error",
        "model: claude-nonexistent",
    ),
    (
        "no messages",
        anthropic(messages=[]),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "messages: at least one message is required",
    ),
    (
        "assistant first",
        anthropic({"role": "assistant", "content": "Hi."}, user("hello")),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        'messages: first message must use the "user" role',
    ),
    (
        "empty text",
        anthropic(user("")),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "messages: text content blocks must be non-empty",
    ),
    (
        "tool_use not answered",
        anthropic(user("go"), tool_use("toolu_1"), user("and?")),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        MISSING,
    ),
    (
        "tool_use last",
        anthropic(user("go"), tool_use("toolu_1")),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        MISSING,
    ),
    (
        "tool_result for another call",
        anthropic(
            user("go"),
            tool_use("toolu_1"),
            {
                "role": "user",
                "content": [*tool_result("toolu_1")["content"], *tool_result("toolu_2")["content"]],
            },
        ),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        UNEXPECTED,
    ),
    (
        "tool blocks without tools",
        anthropic(user("go"), tool_use("toolu_1"), tool_result("toolu_1"), tools=[]),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "Requests which include `tool_use` or `tool_result` blocks must define tools.",
    ),
    (
        "a tool_use id twice",
        anthropic(
            user("go"),
            tool_use("toolu_1"),
            tool_result("toolu_1"),
            tool_use("toolu_1"),
            tool_result("toolu_1"),
        ),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "messages.3.content.0: `tool_use` ids must be unique",
    ),
    (
        "five cache marks",
        FIVE_MARKS,
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    (
        "one hour after five minutes",
        LATE_HOUR,
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block",
    ),
    (
        "trailing whitespace in a prefill",
        anthropic(user("go"), {"role": "assistant", "content": "Sure "}),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "messages: final assistant content cannot end with trailing whitespace",
    ),
    (
        "tool_choice without tools",
        anthropic(tools=[], tool_choice={"type": "auto"}),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "tool_choice may only be specified while providing tools",
    ),
    (
        "max_tokens above the model's",
        anthropic(max_tokens=64_001),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for "
        "claude-sonnet-4-5",
    ),
    (
        "prompt longer than the window",
        LONG,
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        f"prompt is too long: {_prompt(LONG)} tokens > 2000 maximum",
    ),
    (
        "prompt and max_tokens over the window",
        CAPPED,
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        f"input length and `max_tokens` exceed context limit: {_prompt(CAPPED)} + 1000 > "
        "2000, decrease input length or `max_tokens` and try again",
    ),
    (
        "streaming",
        anthropic(stream=True),
        ANTHROPIC_HEADERS,
        400,
        "invalid_request_error",
        "stream: the loopback provider answers whole messages only",
    ),
]


@pytest.mark.parametrize(
    ("body", "headers", "status", "kind", "message"),
    [case[1:] for case in ANTHROPIC_CASES],
    ids=[case[0] for case in ANTHROPIC_CASES],
)
def test_anthropic_rejects_an_invalid_request(
    client: httpx.Client,
    body: Any,
    headers: dict[str, str],
    status: int,
    kind: str,
    message: str,
) -> None:
    response = _post(client, "/v1/messages", body, headers)
    assert response.status_code == status
    assert response.headers["request-id"].startswith("req_loopback_")
    assert response.json() == {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": response.headers["request-id"],
    }


CHAT_CASES: list[tuple[str, Any, dict[str, str], int, str, str, str | None, str | None]] = [
    (
        "no key",
        chat(),
        {"content-type": "application/json"},
        401,
        "invalid_request_error",
        "You didn't provide an API key. You need to provide your API key in an Authorization "
        "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        None,
        None,
    ),
    (
        "unknown field",
        chat(top_k=3),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "Unrecognized request argument supplied: top_k",
        None,
        None,
    ),
    (
        "no messages field",
        {"model": "gpt-5"},
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "Missing required parameter: 'messages'.",
        "messages",
        "missing_required_parameter",
    ),
    (
        "empty messages",
        chat(messages=[]),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
        "empty array instead.",
        "messages",
        "empty_array",
    ),
    (
        "unknown model",
        chat(model="gpt-nonexistent"),
        CHAT_HEADERS,
        404,
        "invalid_request_error",
        "The model `gpt-nonexistent` does not exist or you do not have access to it.",
        None,
        "model_not_found",
    ),
    (
        "unknown role",
        chat({"role": "robot", "content": "beep"}),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', "
        "'function', 'tool', and 'developer'.",
        "messages.[1].role",
        "invalid_value",
    ),
    (
        "tool message without a call",
        chat({"role": "user", "content": "go"}, chat_result("call_1")),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.",
        "messages.[2].role",
        None,
    ),
    (
        "a call not answered",
        chat(
            {"role": "user", "content": "go"}, chat_call("call_1"), {"role": "user", "content": "?"}
        ),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        "call_1",
        "messages.[2].role",
        None,
    ),
    (
        "a result for another call",
        chat({"role": "user", "content": "go"}, chat_call("call_1"), chat_result("call_2")),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "Invalid parameter: 'tool_call_id' of 'call_2' not found in 'tool_calls' of previous "
        "message.",
        "messages.[3].tool_call_id",
        None,
    ),
    (
        "tool_choice without tools",
        chat(tools=[], tool_choice="auto"),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
        "specified.",
        "tool_choice",
        None,
    ),
    (
        "output cap above the model's",
        chat(max_completion_tokens=128_001),
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        "max_tokens is too large: 128001. This model supports at most 128000 completion "
        "tokens, whereas you provided 128001.",
        "max_tokens",
        "invalid_value",
    ),
    (
        "messages longer than the window",
        CHAT_LONG,
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        f"This model's maximum context length is 2000 tokens. However, your messages resulted "
        f"in {_chat_prompt(CHAT_LONG)} tokens. Please reduce the length of the messages.",
        "messages",
        "context_length_exceeded",
    ),
    (
        "messages and completion over the window",
        CHAT_CAPPED,
        CHAT_HEADERS,
        400,
        "invalid_request_error",
        f"This model's maximum context length is 2000 tokens. However, you requested "
        f"{_chat_prompt(CHAT_CAPPED) + 1000} tokens ({_chat_prompt(CHAT_CAPPED)} in the "
        "messages, 1000 in the completion). Please reduce the length of the messages or "
        "completion.",
        "messages",
        "context_length_exceeded",
    ),
]


@pytest.mark.parametrize(
    ("body", "headers", "status", "kind", "message", "param", "code"),
    [case[1:] for case in CHAT_CASES],
    ids=[case[0] for case in CHAT_CASES],
)
def test_chat_completions_rejects_an_invalid_request(
    client: httpx.Client,
    body: Any,
    headers: dict[str, str],
    status: int,
    kind: str,
    message: str,
    param: str | None,
    code: str | None,
) -> None:
    response = _post(client, "/v1/chat/completions", body, headers)
    assert response.status_code == status
    assert response.headers["x-request-id"].startswith("req_loopback_")
    assert response.json() == {
        "error": {"message": message, "type": kind, "param": param, "code": code}
    }


def test_a_wrong_key_is_refused_when_the_server_has_one() -> None:
    with (
        LoopbackProvider(api_key="the-key") as provider,
        httpx.Client(base_url=provider.url) as client,
    ):
        wrong = _post(client, "/v1/messages", anthropic(), ANTHROPIC_HEADERS)
        right = _post(
            client, "/v1/messages", anthropic(), {**ANTHROPIC_HEADERS, "x-api-key": "the-key"}
        )
        wrong_chat = _post(client, "/v1/chat/completions", chat(), CHAT_HEADERS)
    assert (wrong.status_code, wrong.json()["error"]["message"]) == (401, "invalid x-api-key")
    assert right.status_code == 200
    assert (wrong_chat.status_code, wrong_chat.json()["error"]["code"]) == (401, "invalid_api_key")


def test_valid_requests_with_tool_loops_marks_and_prefills_are_accepted(
    client: httpx.Client,
) -> None:
    marked = anthropic(
        user("go"),
        tool_use("toolu_1", text="Listing."),
        tool_result("toolu_1"),
        {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": MARK}]},
        {"role": "assistant", "content": "Sure"},
    )
    marked["tools"][0] = {**marked["tools"][0], "cache_control": MARK}
    assert _post(client, "/v1/messages", marked, ANTHROPIC_HEADERS).status_code == 200
    looped = chat(
        {"role": "user", "content": "go"},
        chat_call("call_1"),
        chat_result("call_1"),
        {"role": "user", "content": "more"},
    )
    assert _post(client, "/v1/chat/completions", looped, CHAT_HEADERS).status_code == 200


def test_chat_completions_takes_an_assistant_message_first_as_the_real_api_does(
    client: httpx.Client,
) -> None:
    body = chat({"role": "assistant", "content": "Hi."}, {"role": "user", "content": "go"})
    assert _post(client, "/v1/chat/completions", body, CHAT_HEADERS).status_code == 200


def test_an_assistant_message_first_is_accepted_when_the_rule_is_off() -> None:
    body = anthropic({"role": "assistant", "content": "Hi."}, user("hello"))
    with (
        LoopbackProvider(require_user_first=False) as provider,
        httpx.Client(base_url=provider.url) as client,
    ):
        response = _post(client, "/v1/messages", body, ANTHROPIC_HEADERS)
    assert response.status_code == 200


def test_unknown_paths_and_methods_are_refused(client: httpx.Client) -> None:
    missing = _post(client, "/v1/complete", anthropic(), ANTHROPIC_HEADERS)
    get = _post(client, "/v1/messages", b"", ANTHROPIC_HEADERS, method="GET")
    assert (missing.status_code, missing.json()["error"]["message"]) == (404, "Not found")
    assert get.status_code == 405
    assert get.json()["error"] == {
        "type": "invalid_request_error",
        "message": "Method GET is not allowed here",
    }
