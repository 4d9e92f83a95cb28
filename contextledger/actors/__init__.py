"""The actor system: a ``Runtime`` supervising, per session, a ``Session`` actor (the only
writer of its events) and the ``RequestBuilder``, ``Compactor`` and ``Pruner`` actors that
work for it, all trio tasks with bounded mailboxes and typed commands; ``embed_in_asyncio``
runs it inside an asyncio application through trio's guest mode."""

from contextledger.actors._api import SessionApi
from contextledger.actors._guest import EmbeddedRuntimeClosed, RuntimeBridge, embed_in_asyncio
from contextledger.actors._runtime import (
    Runtime,
    RuntimeClosed,
    SessionHandle,
    wall_clock_ms,
)
from contextledger.compaction._compactor import CompactionExhausted

__all__ = [
    "CompactionExhausted",
    "EmbeddedRuntimeClosed",
    "Runtime",
    "RuntimeBridge",
    "RuntimeClosed",
    "SessionApi",
    "SessionHandle",
    "embed_in_asyncio",
    "wall_clock_ms",
]
