"""The loopback provider's state machine: a request's bytes in, an answer out, no I/O.

``LoopbackCore.handle`` takes one HTTP request (method, path, headers, body, arrival time)
and returns the ``Reaction``: an answer (status, headers, JSON body), or a dropped
connection, possibly after a delay. In order it:

1. records the request (``Exchange``);
2. takes a queued fault (or a random one), if any: its error answer, or no answer;
3. authenticates, parses and validates the body as the API does (``Dialect.read``), checks
   the model and its limits;
4. finds the conversation's next scripted reply and checks the tool outputs the request
   sends back against the script;
5. charges the prompt to the model's ``cachesim.PromptCache`` at the arrival time, so the
   answer's usage reports the cache reads and writes the provider's rules give;
6. answers, with ids counted from 1 (so the same requests give the same answers).

It is not thread-safe; the server (``_server.py``) calls it under a lock.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from contextledger.cachesim import PromptCache
from contextledger.logging import REDACTED
from contextledger.prices._tables import ModelPrice, price_for
from contextledger.testing.loopback._anthropic import AnthropicMessages
from contextledger.testing.loopback._dialect import (
    Answer,
    ApiError,
    Dialect,
    ParsedRequest,
    Stop,
)
from contextledger.testing.loopback._faults import Fault
from contextledger.testing.loopback._openai_chat import OpenAIChat
from contextledger.testing.loopback._script import Reply, Script, ToolCall
from contextledger.vocabulary._models import Model, ModelLimits

#: The models served when none are given: their published windows and output caps.
DEFAULT_MODELS: Final = (
    Model(
        provider_id="anthropic",
        model_id="claude-sonnet-4-5",
        limits=ModelLimits(context=200_000, output=64_000),
    ),
    Model(
        provider_id="openai",
        model_id="gpt-5",
        limits=ModelLimits(context=400_000, output=128_000),
    ),
)
#: Headers whose values are not kept in the record.
SECRET_HEADERS: Final = frozenset({"x-api-key", "authorization"})
#: The prefix of the message of a request rejected for not following the script.
MISMATCH_PREFIX: Final = "loopback script: "
#: Characters of an output quoted in a mismatch message.
QUOTE_CHARS: Final = 200


class Exchange(msgspec.Struct, frozen=True, kw_only=True):
    """One request received and what was answered.

    ``index`` counts requests from 1; ``at`` is the server clock's reading on arrival;
    ``headers`` are lower-cased, with the API key masked; ``body`` is the raw bytes and
    ``json`` their parsed value (None when they are not JSON; parsed again on each read, so
    that a long run does not keep every request's parse tree alive, where the process
    embedding the runtime would pay for it in garbage collections); ``conversation`` is the
    script's key for the request (``""`` when it names none); ``status`` is the answer's HTTP
    status (None when the connection was dropped); ``response`` the JSON answered; ``fault``
    the kind of the fault injected, if one was.
    """

    index: int
    at: float
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    conversation: str
    status: int | None
    response: Any
    fault: str | None = None

    @property
    def json(self) -> Any:
        """The body's parsed value, or None when it is empty or not JSON."""
        try:
            return msgspec.json.decode(self.body) if self.body else None
        except msgspec.DecodeError:
            return None


class Reaction(msgspec.Struct, frozen=True, kw_only=True):
    """What the server does: answer ``status`` with ``headers`` and ``body`` after ``delay``
    seconds, or (``drop``) close the connection after ``delay`` without answering."""

    status: int = 0
    headers: dict[str, str] = {}
    body: bytes = b""
    delay: float = 0.0
    drop: bool = False


class _Conversation:
    """One conversation's place in its script and the outputs its next request must carry."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.cursor = 0
        self.pending: tuple[ToolCall, ...] = ()


class _QueuedFault(msgspec.Struct, frozen=True):
    fault: Fault
    conversation: str | None


class LoopbackCore:
    """The provider's state: conversations, prompt caches, faults, the record.

    ``script`` is the ``Script`` every conversation plays, or a function giving each
    conversation key its own. ``models`` are the models served (any other is a 404);
    ``prices`` overrides the bundled price table entry that sets a model's minimum cacheable
    prefix and cache lifetime. ``api_key``, when given, is the only key accepted (else any
    non-empty key is). ``require_user_first`` rejects a first message from the assistant
    on Anthropic (as Bedrock and the Messages API before late 2024 did).
    """

    def __init__(
        self,
        script: Script | Callable[[str], Script] | None = None,
        *,
        models: Sequence[Model] = DEFAULT_MODELS,
        prices: Mapping[str, ModelPrice] | None = None,
        api_key: str | None = None,
        require_user_first: bool = True,
    ) -> None:
        self._script = script if script is not None else Script()
        self.models = {m.model_id: m for m in models}
        given = dict(prices or {})
        self.prices = {m: given.get(m) or _price(m) for m in self.models}
        self.api_key = api_key
        self.require_user_first = require_user_first
        self.dialects: dict[str, Dialect] = {d.path: d for d in (AnthropicMessages(), OpenAIChat())}
        self.exchanges: list[Exchange] = []
        self.mismatches: list[str] = []
        self._conversations: dict[str, _Conversation] = {}
        self._caches: dict[tuple[str, str], PromptCache] = {}
        self._faults: deque[_QueuedFault] = deque()
        self._random: tuple[float, tuple[Fault, ...], random.Random] | None = None
        self._issued: dict[str, ToolCall] = {}
        self._answers = 0

    # --- faults ---------------------------------------------------------------------------

    def inject(self, faults: Sequence[Fault], *, times: int, conversation: str | None) -> None:
        """Queue ``faults`` (in order, the sequence ``times`` times) for the next requests of
        ``conversation`` (None: any request)."""
        if times < 0:
            raise ValueError("times must be zero or more")
        for _ in range(times):
            self._faults.extend(_QueuedFault(f, conversation) for f in faults)

    def random_faults(self, rate: float, faults: Sequence[Fault], seed: int) -> None:
        """From now on, a request with no queued fault gets one of ``faults`` with
        probability ``rate``, drawn from ``random.Random(seed)`` (deterministic in the order
        requests arrive). A rate of 0 turns this off."""
        if not 0 <= rate <= 1:
            raise ValueError("rate must be between 0 and 1")
        if rate and not faults:
            raise ValueError("random faults need at least one fault")
        self._random = (rate, tuple(faults), random.Random(seed)) if rate else None

    def _take_fault(self, conversation: str) -> Fault | None:
        for queued in self._faults:
            if queued.conversation in (None, conversation):
                self._faults.remove(queued)
                return queued.fault
        if self._random is not None:
            rate, faults, rng = self._random
            if rng.random() < rate:
                return rng.choice(faults)
        return None

    @property
    def queued_faults(self) -> int:
        """Faults injected and not yet taken."""
        return len(self._faults)

    # --- the script -------------------------------------------------------------------------

    def expected_output(self, call_id: str) -> str | None:
        """The output the script expects back for a tool call the server issued (None for
        an unknown id, or a call whose output is not checked)."""
        call = self._issued.get(call_id)
        return call.output if call is not None else None

    def tool_call(self, call_id: str) -> ToolCall | None:
        """The scripted call the server issued under ``call_id``."""
        return self._issued.get(call_id)

    def _conversation(self, key: str) -> _Conversation:
        conversation = self._conversations.get(key)
        if conversation is None:
            script = self._script if isinstance(self._script, Script) else self._script(key)
            conversation = self._conversations[key] = _Conversation(script)
        return conversation

    # --- handling -------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, at: float
    ) -> Reaction:
        """React to one request (see the module docstring) and record it."""
        headers = {k.lower(): v for k, v in headers.items()}
        try:
            data: Any = msgspec.json.decode(body) if body else None
            parsed_json = True
        except msgspec.DecodeError:
            data, parsed_json = None, False
        dialect = self.dialects.get(path.split("?", 1)[0])
        conversation = dialect.conversation(data) if dialect is not None else ""
        fault = self._take_fault(conversation)
        reaction, response = self._react(dialect, method, headers, data, parsed_json, fault, at)
        self.exchanges.append(
            Exchange(
                index=len(self.exchanges) + 1,
                at=at,
                method=method,
                path=path,
                headers={k: REDACTED if k in SECRET_HEADERS else v for k, v in headers.items()},
                body=body,
                conversation=conversation,
                status=None if reaction.drop else reaction.status,
                response=response,
                fault=fault.kind if fault is not None else None,
            )
        )
        return reaction

    def _react(
        self,
        dialect: Dialect | None,
        method: str,
        headers: Mapping[str, str],
        data: Any,
        parsed_json: bool,
        fault: Fault | None,
        at: float,
    ) -> tuple[Reaction, Any]:
        request_id = (dialect or AnthropicMessages()).request_id(len(self.exchanges) + 1)
        if fault is not None and fault.kind in ("dropped", "hang"):
            return Reaction(drop=True, delay=fault.seconds), None
        if dialect is None:
            error = AnthropicMessages().invalid("Not found", status=404)
            return self._error(AnthropicMessages(), error, request_id)
        if fault is not None:
            tokens = window = 0
            if fault.kind == "overflow":
                parsed = dialect.read(data, require_user_first=False)
                tokens = parsed.prompt_tokens if isinstance(parsed, ParsedRequest) else 0
                model = self.models.get(parsed.model if isinstance(parsed, ParsedRequest) else "")
                window = model.limits.context if model is not None else tokens
            return self._error(dialect, dialect.fault(fault, tokens, window), request_id)
        outcome = self._accept(dialect, method, headers, data, parsed_json)
        if isinstance(outcome, ApiError):
            return self._error(dialect, outcome, request_id)
        request, model = outcome
        answer = self._answer(dialect, request, model, at)
        if isinstance(answer, ApiError):
            return self._error(dialect, answer, request_id)
        body = dialect.answer_body(answer)
        headers_out = {"content-type": "application/json", dialect.request_id_header: request_id}
        return Reaction(status=200, headers=headers_out, body=msgspec.json.encode(body)), body

    def _accept(
        self,
        dialect: Dialect,
        method: str,
        headers: Mapping[str, str],
        data: Any,
        parsed_json: bool,
    ) -> tuple[ParsedRequest, Model] | ApiError:
        """The request and its model, or the error the API answers it with."""
        if method != "POST":
            return dialect.invalid(f"Method {method} is not allowed here", status=405)
        error = dialect.authenticate(headers, self.api_key)
        if error is not None:
            return error
        if not parsed_json:
            return dialect.invalid("There was an error parsing the body: it is not valid JSON")
        request = dialect.read(data, require_user_first=self.require_user_first)
        if isinstance(request, ApiError):
            return request
        model = self.models.get(request.model)
        if model is None:
            return dialect.unknown_model(request.model)
        if request.stream:
            return dialect.invalid("stream: the loopback provider answers whole messages only")
        error = dialect.limits(request, model)
        return error if error is not None else (request, model)

    def _answer(
        self, dialect: Dialect, request: ParsedRequest, model: Model, at: float
    ) -> Answer | ApiError:
        """The scripted answer, or the 400 for tool outputs that differ from the script."""
        conversation = self._conversation(request.conversation)
        script = conversation.script
        step = (
            script.steps[conversation.cursor] if conversation.cursor < len(script.steps) else None
        )
        # A request that may not call tools, when the step calls them, is a detour (a summary
        # request, say): answered with text, it neither takes the step nor checks outputs.
        detour = step is not None and bool(step.tool_calls) and not request.tools_allowed
        if step is None:
            reply, advance = script.final, False
        elif detour:
            reply, advance = script.tools_off, False
        else:
            reply, advance = step, True
        if not detour and conversation.pending:
            mismatch = _mismatch(request, conversation.pending)
            if mismatch is not None:
                self.mismatches.append(mismatch)
                return dialect.invalid(MISMATCH_PREFIX + mismatch)
            conversation.pending = ()
        cost = self._cache(dialect, request.model).charge(request.sim_request(at))
        output_tokens = reply.output_tokens or _estimate(reply)
        text, calls, stop = reply.text, reply.tool_calls, _stop(reply)
        cap = request.max_tokens
        if cap is not None and output_tokens > cap:
            # The model is cut off: what fits of the text, no call; the step is not done.
            text, calls, stop, advance = text[: cap * 4], (), "max_tokens", False
            output_tokens = cap
        issued = []
        for call in calls:
            call_id = dialect.tool_id(len(self._issued) + 1)
            self._issued[call_id] = call
            issued.append((call_id, call))
        if advance:
            conversation.cursor += 1
        if calls and script.check_outputs:
            conversation.pending = calls
        self._answers += 1
        return Answer(
            message_id=dialect.message_id(self._answers),
            model=request.model,
            text=text,
            calls=tuple(issued),
            stop=stop,
            cost=cost,
            output_tokens=output_tokens,
            created=int(at),
        )

    def _cache(self, dialect: Dialect, model_id: str) -> PromptCache:
        key = (dialect.api, model_id)
        cache = self._caches.get(key)
        if cache is None:
            price = self.prices[model_id]
            if price.family != dialect.family:
                price = msgspec.structs.replace(price, family=dialect.family)
            cache = self._caches[key] = PromptCache(price)
        return cache

    def _error(self, dialect: Dialect, error: ApiError, request_id: str) -> tuple[Reaction, Any]:
        body = dialect.error_body(error, request_id)
        headers = {
            "content-type": "application/json",
            dialect.request_id_header: request_id,
            **error.headers,
        }
        return Reaction(status=error.status, headers=headers, body=msgspec.json.encode(body)), body


def _price(model_id: str) -> ModelPrice:
    try:
        return price_for(model_id)
    except KeyError:
        raise ValueError(
            f"no price table entry matches model {model_id!r}: give its price in prices="
        ) from None


def _stop(reply: Reply) -> Stop:
    return "tool_use" if reply.tool_calls else "end_turn"


def _estimate(reply: Reply) -> int:
    """A reply's output tokens: its text and calls as JSON, four characters per token."""
    content = [reply.text, *((c.name, c.input) for c in reply.tool_calls)]
    return max(1, -(-len(msgspec.json.encode(content)) // 4))


def _mismatch(request: ParsedRequest, pending: tuple[ToolCall, ...]) -> str | None:
    """Why the tool results of ``request`` do not match the outputs the script expects for
    ``pending`` (the calls of the conversation's last reply), or None when they do or when
    those calls are no longer in the request.

    The calls are found as the latest assistant turn whose calls have the same names and
    inputs, in order; their results are in the turn after it, by the ids the client used."""
    wanted = [(c.name, c.input) for c in pending]
    turns = request.turns
    for t in range(len(turns) - 1, -1, -1):
        turn = turns[t]
        if turn.role != "assistant" or [(u.name, u.input) for u in turn.tool_uses] != wanted:
            continue
        following = turns[t + 1] if t + 1 < len(turns) else None
        results = {r.tool_use_id: r.text for r in following.tool_results} if following else {}
        for use, call in zip(turn.tool_uses, pending, strict=True):
            got = results.get(use.id)
            if call.output is not None and got != call.output:
                return (
                    f"the result of tool call {use.id} ({call.name}) is {_quote(got)}, "
                    f"expected {_quote(call.output)}"
                )
        return None
    return None


def _quote(text: str | None) -> str:
    if text is None:
        return "missing"
    return repr(text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "...")
