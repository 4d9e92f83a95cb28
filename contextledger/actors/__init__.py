"""The actor system: a ``Runtime`` supervising, per session, a ``Session`` actor (the only
writer of its events) and the ``RequestBuilder``, ``Compactor`` and ``Pruner`` actors that
work for it, all trio tasks with bounded mailboxes and typed commands."""

from contextledger.actors.runtime import (
    CompactionExhausted,
    Runtime,
    SessionHandle,
    wall_clock_ms,
)

__all__ = ["CompactionExhausted", "Runtime", "SessionHandle", "wall_clock_ms"]
