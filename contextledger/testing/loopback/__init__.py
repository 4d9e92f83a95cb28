"""A provider you can run an agent loop against: an HTTP server on 127.0.0.1 that speaks
Anthropic Messages and OpenAI Chat Completions, answers from a script of tool loops,
validates requests as the real APIs do (with their error shapes and statuses), reports the
prompt-cache reads and writes the providers' rules give (``contextledger.cachesim``), injects
faults on demand, and records every request it receives.

    script = tool_loop(3)
    async with LoopbackProvider(script) as provider:
        client = ProviderClient(wire_format("anthropic"), provider.url, api_key="test")
        ...
        assert [e.status for e in provider.received] == [200, 200, 200, 200]

See ``docs/testing.md`` ("A provider on loopback").
"""

from contextledger.testing.loopback._core import DEFAULT_MODELS, Exchange, LoopbackCore, Reaction
from contextledger.testing.loopback._dialect import ApiError, ToolUse, asks_for_summary
from contextledger.testing.loopback._faults import Fault, FaultKind
from contextledger.testing.loopback._reading import ModelStep, read_step
from contextledger.testing.loopback._script import Reply, Script, ToolCall, tool_loop
from contextledger.testing.loopback._server import LoopbackProvider, LoopbackServerError

__all__ = [
    "DEFAULT_MODELS",
    "ApiError",
    "Exchange",
    "Fault",
    "FaultKind",
    "LoopbackCore",
    "LoopbackProvider",
    "LoopbackServerError",
    "ModelStep",
    "Reaction",
    "Reply",
    "Script",
    "ToolCall",
    "ToolUse",
    "asks_for_summary",
    "read_step",
    "tool_loop",
]
